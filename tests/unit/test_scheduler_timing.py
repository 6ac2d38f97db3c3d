"""When the dispatch loop claims and publishes a job due in the future.

The claim runs CLAIM_LEAD ahead of the due time, so its store round trip is off the job's
start path; the wake-up still goes out at the due instant, never before it.
"""

from __future__ import annotations

from datetime import timedelta

import trio
import trio.testing

from jobscheduler.domain.model import Status
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.scheduler.loop import CLAIM_LEAD
from jobscheduler.store import JobStore

from .conftest import after, make_job
from .roles_support import ObservedBus, dispatching, status_of, wake_up


async def test_a_future_job_is_claimed_ahead_and_published_at_its_due_time(
    autojump_clock: trio.testing.MockClock, long_tick: tuple[Deps, ObservedBus], store: JobStore
) -> None:
    deps, bus = long_tick
    job = make_job(scheduled_at=after(60))
    await store.insert(job)

    async with dispatching(deps):
        await deps.clock.sleep_until(job.scheduled_at - timedelta(seconds=CLAIM_LEAD / 2))
        claimed_early = await status_of(store, job)
        published_early = list(bus.published)
        await bus.wait_for(lambda: bool(bus.published))
        published_at = deps.clock.now()

    assert claimed_early is Status.QUEUED
    assert published_early == []
    assert bus.published == [wake_up(job)]
    assert job.scheduled_at <= published_at < job.scheduled_at + timedelta(milliseconds=1)


async def test_jobs_due_now_and_within_the_lead_go_out_in_due_order_each_on_time(
    autojump_clock: trio.testing.MockClock, long_tick: tuple[Deps, ObservedBus], store: JobStore
) -> None:
    deps, bus = long_tick
    now_due = make_job(scheduled_at=deps.clock.now())
    soon = make_job(scheduled_at=deps.clock.now() + timedelta(seconds=CLAIM_LEAD / 2))
    await store.insert(soon)
    await store.insert(now_due)
    published_at: dict[str, object] = {}

    async with dispatching(deps):
        while len(published_at) < 2:
            await bus.wait_for(lambda: len(bus.published) > len(published_at))
            for message in bus.published:
                published_at.setdefault(message.job_id, deps.clock.now())

    assert bus.published == [wake_up(now_due), wake_up(soon)]
    assert published_at[now_due.id] == now_due.scheduled_at
    assert published_at[soon.id] == soon.scheduled_at
