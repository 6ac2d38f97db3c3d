"""What every role receives: its ports, settings, metrics, clock, and the scheduler's waker."""

from __future__ import annotations

from datetime import datetime

import attrs
import trio

from jobscheduler.bus import Bus
from jobscheduler.clock import Clock, SystemClock
from jobscheduler.config import Settings
from jobscheduler.election import Elector
from jobscheduler.handlers import HandlerRegistry
from jobscheduler.observability.health import Health
from jobscheduler.observability.metrics import Metrics
from jobscheduler.observability.tracing import DISABLED, Tracing
from jobscheduler.store import JobStore


class Waker:
    """Wakes the scheduler early when a job becomes due before its planned wake-up.

    In the single-process deployment the API calls :meth:`notify` after storing a job; the
    scheduler sleeps in :meth:`sleep_until`. With separate processes nobody notifies and
    the scheduler falls back to its tick.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._event = trio.Event()
        self._planned: datetime | None = None
        #: The earliest due time notified while the scheduler was not sleeping.
        self._missed: datetime | None = None
        #: The scheduler holds jobs back until executors take queued ones (flow control).
        self.room_wanted = False

    def notify(self, due_at: datetime) -> None:
        """A job is due at ``due_at``: wake the scheduler if it planned to sleep past that.

        While the scheduler is awake (ticking) the due time is remembered, and its next
        sleep ends by then: it may have read the next due time before this job was stored.
        A job due after that sleep would end anyway (the common case: jobs created for
        later) costs the scheduler nothing, however many are created.
        """
        if self._planned is None:
            if self._missed is None or due_at < self._missed:
                self._missed = due_at
        elif due_at < self._planned:
            self._event.set()

    def room_made(self) -> None:
        """Executors took queued jobs: wake the scheduler if it waits for room ahead of
        them (else nothing: picks are frequent, and most passes would find nothing)."""
        if self.room_wanted:
            self.notify(self._clock.now())

    async def sleep_until(self, deadline: datetime) -> None:
        """Sleep until ``deadline`` or an earlier :meth:`notify`, whichever comes first."""
        missed, self._missed = self._missed, None
        if missed is not None and missed < deadline:
            deadline = missed
        self._planned = deadline
        try:
            if not self._event.is_set():
                delay = (deadline - self._clock.now()).total_seconds()
                with trio.move_on_after(max(delay, 0.0)):
                    await self._event.wait()
        finally:
            self._planned = None
            self._event = trio.Event()


@attrs.frozen(kw_only=True)
class Deps:
    """The dependencies of the roles. Roles never know which adapters they hold."""

    settings: Settings
    store: JobStore
    bus: Bus
    elector: Elector
    registry: HandlerRegistry
    metrics: Metrics = attrs.field(factory=Metrics)
    clock: Clock = attrs.field(factory=SystemClock)
    waker: Waker | None = None
    #: Liveness/readiness checks served on the metrics listener (roles register theirs).
    health: Health = attrs.field(factory=Health)
    #: Spans of the jobs' lives (:mod:`jobscheduler.observability.tracing`); off by default.
    tracing: Tracing = DISABLED
