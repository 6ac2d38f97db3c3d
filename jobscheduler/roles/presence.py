"""The presence beat: a scheduler or executor process keeps its :class:`WorkerBeat` fresh in
the job store, so the Overview can show the leader and the live executors.

:class:`Presence` is started by ``run_scheduler`` / ``run_executor`` in their own nurseries.
It writes a record at start, then every ``interval`` and at once when :meth:`Presence.changed`
is called (leadership won or lost), prunes records that expired (so a killed process's record
disappears after ``MISSED_BEATS`` beats without anyone's help), and deletes its own record on
the way out (shielded, bounded). A store that fails or hangs costs a warning per beat at most
(one bounded call per beat); the loop goes on.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence

import trio

from jobscheduler._scopes import shielded
from jobscheduler.domain.workers import BEAT_INTERVAL, WorkerBeat, expiry
from jobscheduler.errors import StoreError
from jobscheduler.observability.logthrottle import LogThrottle

from .deps import Deps

log = logging.getLogger(__name__)

#: Longest a single beat (write + prune) may take before it is given up.
BEAT_TIMEOUT = 2.0
#: Longest the final delete may take at shutdown.
FORGET_TIMEOUT = 1.0


class Presence:
    """One process's record for one role; run :meth:`run` in a nursery."""

    def __init__(
        self,
        deps: Deps,
        role: str,
        *,
        job_types: Sequence[str] = (),
        in_flight: Callable[[], int] = lambda: 0,
        capacity: int = 0,
        interval: float = BEAT_INTERVAL,
    ) -> None:
        self._deps = deps
        self.role = role
        self.id = f"{role}:{deps.settings.worker_id}"
        self._job_types = tuple(job_types)
        self._in_flight = in_flight
        self._capacity = capacity
        self._interval = interval
        self._host = socket.gethostname()
        self._pid = os.getpid()
        self._started_at = deps.clock.now()
        self._leader = False
        self._wake = trio.Event()
        self._throttled = LogThrottle(log)

    def changed(self, *, leader: bool) -> None:
        """Leadership changed: write the record at the next checkpoint, not a beat later."""
        self._leader = leader
        self._wake.set()

    def beat(self) -> WorkerBeat:
        """The record as of now."""
        now = self._deps.clock.now()
        return WorkerBeat(
            id=self.id,
            role=self.role,
            host=self._host,
            pid=self._pid,
            job_types=self._job_types,
            in_flight=self._in_flight(),
            capacity=self._capacity,
            leader=self._leader,
            started_at=self._started_at,
            seen_at=now,
            expires_at=expiry(now, self._interval),
        )

    async def _beat_once(self) -> None:
        store = self._deps.store
        beat = self.beat()
        with trio.move_on_after(BEAT_TIMEOUT) as scope:
            try:
                await store.beat_worker(beat)
                await store.prune_workers(beat.seen_at)
            except StoreError as exc:
                self._throttled.log(
                    logging.WARNING,
                    "presence beat failed",
                    key="beat",
                    extra={"role": self.role, "error": str(exc)},
                )
                return
        if scope.cancelled_caught:
            self._throttled.log(
                logging.WARNING,
                "presence beat timed out",
                key="beat",
                extra={"role": self.role, "timeout": BEAT_TIMEOUT},
            )
            return
        self._throttled.recovered("beat", "presence beats written again", extra={"role": self.role})

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Beat until cancelled, then delete this process's record."""
        log.info("presence started", extra={"role": self.role, "worker": self.id})
        task_status.started()
        try:
            while True:
                self._wake = trio.Event()
                await self._beat_once()
                with trio.move_on_after(self._interval):
                    await self._wake.wait()
        finally:
            with shielded(FORGET_TIMEOUT):
                try:
                    await self._deps.store.forget_worker(self.id)
                except StoreError as exc:
                    log.warning(
                        "presence record not deleted",
                        extra={"role": self.role, "error": str(exc)},
                    )
