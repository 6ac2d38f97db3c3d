"""Wake-ups for a later start (a job the leader claimed ahead under a rate limit): the
executor keeps them without holding up the bus and starts each job at its instant, never
before, and a wake-up of an earlier claim of the job starts nothing."""

from __future__ import annotations

from datetime import timedelta

import trio
import trio.testing

from jobscheduler.bus import WakeUp
from jobscheduler.domain.model import Status
from jobscheduler.store.base import JobStore
from jobscheduler.store.query import Pick

from .conftest import DepsFactory, make_job
from .roles_support import consuming


async def test_a_wake_up_for_a_later_start_runs_its_job_at_that_instant_not_before(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    later, now = make_job(), make_job()
    await store.insert_many([later, now])
    start = deps.clock.now() + timedelta(seconds=5)
    await store.claim_picks(
        deps.clock.now(), [Pick(job_id=later.id, start_at=start), Pick(job_id=now.id)]
    )
    async with consuming(deps):
        await deps.bus.publish(
            [
                WakeUp(job_id=later.id, job_type="noop", priority=0, not_before=start),
                WakeUp(job_id=now.id, job_type="noop", priority=0),
            ]
        )
        await trio.sleep(4.9)
        # The job behind the held wake-up was not held up by it.
        assert (await store.get(now.id)).status is Status.COMPLETED
        assert (await store.get(later.id)).status is Status.QUEUED
        await trio.sleep(0.2)
    done = await store.get(later.id)
    assert done.status is Status.COMPLETED
    [attempt] = await store.attempts(later.id)
    assert attempt.started_at >= start


async def test_a_wake_up_naming_an_earlier_start_of_its_job_starts_nothing(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    job = make_job()
    await store.insert(job)
    earlier = deps.clock.now() + timedelta(seconds=1)
    start = deps.clock.now() + timedelta(seconds=3)
    await store.claim_picks(deps.clock.now(), [Pick(job_id=job.id, start_at=start)])
    async with consuming(deps):
        await deps.bus.publish(
            [WakeUp(job_id=job.id, job_type="noop", priority=0, not_before=earlier)]
        )
        await trio.sleep(2)
    assert (await store.get(job.id)).status is Status.QUEUED
