"""An outcome write that timed out but landed, then retried: the retry finds the earlier
try's write and ends the job as written - its dead letter announced, its retry time told to
the waker - instead of losing to its own fence and counting the job stale."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import attrs
import trio
import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import Job, Status
from jobscheduler.handlers import HandlerRegistry, JobContext
from jobscheduler.roles.deps import Deps, Waker
from jobscheduler.roles.executor.consume import OUTCOME_TIMEOUT
from jobscheduler.store import JobStore

from .conftest import DepsFactory, ProxyStore, make_job
from .roles_support import (
    ObservedBus,
    consuming,
    processed,
    queue,
    registry_with,
    status_of,
    wake_up,
)


class LandsButTimesOut(ProxyStore):
    """The first outcome write of ``transition`` lands, but not its attempt record (as a
    MongoDB write cut off between the two), and its reply never comes (the executor's try
    times out); later writes go through."""

    def __init__(self, inner: JobStore, transition: str) -> None:
        super().__init__(inner)
        self.transition = transition
        self.lost_replies = 0

    async def apply_many_lean(
        self, changes: Sequence[states.Change], read_back: Sequence[bool]
    ) -> list[Job | bool]:
        if self.lost_replies or not any(c.transition == self.transition for c in changes):
            return await self.inner.apply_many_lean(changes, read_back)
        self.lost_replies += 1
        unrecorded = [attrs.evolve(change, record=None) for change in changes]
        written = await self.inner.apply_many_lean(unrecorded, read_back)
        await trio.sleep(OUTCOME_TIMEOUT + 1)  # the reply is lost
        return written


def losing_a_reply(
    make_deps: DepsFactory, store: JobStore, transition: str, **kwargs: Any
) -> tuple[LandsButTimesOut, ObservedBus, Deps]:
    """Deps on an observed bus and on ``store`` behind :class:`LandsButTimesOut`."""
    flaky = LandsButTimesOut(store, transition)
    bus = ObservedBus()
    return flaky, bus, make_deps(store=flaky, bus=bus, **kwargs)


def failing() -> HandlerRegistry:
    async def fail(ctx: JobContext) -> None:
        raise RuntimeError("boom")

    return registry_with(fails=fail)


async def run_one(
    deps: Deps, store: JobStore, job: Job, bus: ObservedBus, done: Callable[[], bool]
) -> None:
    """Queue ``job``, let an executor run it, and stop once ``done()``."""
    await queue(deps, store, job)
    async with consuming(deps, job.job_type):
        await bus.publish([wake_up(job)])
        await bus.wait_for(done)


async def test_a_dead_letter_whose_write_landed_before_its_retry_is_still_announced(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    flaky, bus, deps = losing_a_reply(make_deps, store, "fail", registry=failing())
    job = make_job(job_type="fails", max_attempts=1)

    await run_one(deps, store, job, bus, lambda: bool(bus.dead_letters))

    assert flaky.lost_replies == 1
    assert bus.acked == [wake_up(job)]
    assert await status_of(store, job) is Status.DLQ
    assert [letter.job_id for letter in bus.dead_letters] == [job.id]
    assert [a.outcome for a in await store.attempts(job.id)] == [Outcome.FAILED]
    assert processed(deps, "fails", "dlq") == 1


async def test_a_failed_attempt_whose_write_landed_before_its_retry_still_wakes_the_scheduler(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    _, bus, deps = losing_a_reply(make_deps, store, "fail", registry=failing())
    woken: list[datetime] = []

    class RecordingWaker(Waker):
        def notify(self, due_at: datetime) -> None:
            woken.append(due_at)
            super().notify(due_at)

    deps = attrs.evolve(deps, waker=RecordingWaker(deps.clock))
    job = make_job(job_type="fails", max_attempts=3)

    await run_one(deps, store, job, bus, lambda: bool(bus.acked))

    retried = await store.get(job.id)
    assert retried.status is Status.PENDING
    assert woken == [retried.scheduled_at]
    assert processed(deps, "fails", "retried") == 1


async def test_a_completion_whose_write_landed_before_its_retry_counts_as_completed(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    _, bus, deps = losing_a_reply(make_deps, store, "complete")
    job = make_job()

    await run_one(deps, store, job, bus, lambda: bool(bus.acked))

    assert await status_of(store, job) is Status.COMPLETED
    assert [a.outcome for a in await store.attempts(job.id)] == [Outcome.COMPLETED]
    assert processed(deps, "noop", "completed") == 1
    assert processed(deps, "noop", "stale") == 0
