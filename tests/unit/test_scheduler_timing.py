"""When the dispatch loop claims and publishes a job due in the future.

The claim runs CLAIM_LEAD ahead of the due time, so its store round trip is off the job's
start path; the wake-up still goes out at the due instant, never before it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import trio
import trio.testing

from jobscheduler.domain.model import Job, Status
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.scheduler.loop import CLAIM_LEAD, CLAIM_SLACK, Scheduler
from jobscheduler.store import JobStore
from jobscheduler.store.query import Pick

from .conftest import DepsFactory, ProxyStore, after, make_job, make_settings
from .roles_support import LOOP_BOUND, TERM, ObservedBus, dispatching, status_of, wake_up


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


async def test_a_claim_slower_than_the_gap_between_jobs_delays_no_wake_up(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    # Jobs due every 5 ms and a claim that takes 8 ms: the wake-ups of one claim wait for
    # their instants while the loop claims the next stretch, so none goes out late.
    claims: list[tuple[datetime, int]] = []

    class SlowClaims(ProxyStore):
        async def claim_due(self, now: datetime, limit: int) -> list[Job]:
            return await self._slowly(self.inner.claim_due(now, limit))

        async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
            return await self._slowly(self.inner.claim_picks(now, picks))

        async def _slowly(self, claim: Awaitable[list[Job]]) -> list[Job]:
            began = deps.clock.now()
            await trio.sleep(0.008)
            claimed = await claim
            if claimed:
                claims.append((began, len(claimed)))
            return claimed

    bus = ObservedBus()
    settings = make_settings(tmp_path, scheduler_tick=3600.0)
    deps = make_deps(store=SlowClaims(store), bus=bus, settings=settings)
    first = deps.clock.now() + timedelta(seconds=1)
    jobs = [make_job(scheduled_at=first + timedelta(milliseconds=5 * i)) for i in range(60)]
    await store.insert_many(jobs)
    published_at: dict[str, datetime] = {}

    async with dispatching(deps):
        while len(published_at) < len(jobs):
            await bus.wait_for(lambda: len(bus.published) > len(published_at))
            for message in bus.published:
                published_at.setdefault(message.job_id, deps.clock.now())

    assert [published_at[job.id] for job in jobs] == [job.scheduled_at for job in jobs]
    assert sum(count for _, count in claims) == len(jobs)
    # Each claim began at least CLAIM_SLACK before the first job it took was due, and
    # claims still take the jobs of a stretch together (about four each here).
    assert len(claims) <= len(jobs) // 3
    taken = 0
    for began, count in claims:
        assert jobs[taken].scheduled_at - began >= timedelta(seconds=CLAIM_SLACK)
        taken += count


async def test_wake_ups_claimed_ahead_still_go_out_on_time_when_the_term_ends(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    term = trio.CancelScope()
    claimed_at: list[datetime] = []

    class EndTermOnceClaimed(ProxyStore):
        async def claim_due(self, now: datetime, limit: int) -> list[Job]:
            return self._ending(await self.inner.claim_due(now, limit))

        async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
            return self._ending(await self.inner.claim_picks(now, picks))

        def _ending(self, claimed: list[Job]) -> list[Job]:
            if claimed:  # the elector ends the term right after the claim landed
                claimed_at.append(deps.clock.now())
                term.cancel()
            return claimed

    bus = ObservedBus()
    settings = make_settings(tmp_path, scheduler_tick=3600.0)
    deps = make_deps(store=EndTermOnceClaimed(store), bus=bus, settings=settings)
    # Due now, and twice more within the claim's lead: one claim takes all three.
    now = deps.clock.now()
    jobs = [make_job(scheduled_at=now + timedelta(seconds=CLAIM_LEAD * i / 3)) for i in range(3)]
    await store.insert_many(jobs)
    published_at: dict[str, datetime] = {}

    async def record() -> None:
        while True:
            await bus.wait_for(lambda: len(bus.published) > len(published_at))
            for message in bus.published:
                published_at.setdefault(message.job_id, deps.clock.now())

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(record)
            with term:
                await Scheduler(deps).dispatch_loop(TERM)
            ended_at = deps.clock.now()
            nursery.cancel_scope.cancel()

    # The term ended with the claim; the loop returned only once each of the three had gone
    # out, at its own instant.
    assert claimed_at == [now]
    for job in jobs:
        assert await status_of(store, job) is Status.QUEUED
    assert [published_at[job.id] for job in jobs] == [job.scheduled_at for job in jobs]
    assert ended_at == jobs[-1].scheduled_at


async def test_a_job_created_due_while_wake_ups_wait_for_their_instant_goes_out_at_once(
    autojump_clock: trio.testing.MockClock, long_tick: tuple[Deps, ObservedBus], store: JobStore
) -> None:
    deps, bus = long_tick
    ahead = make_job(scheduled_at=after(60))
    await store.insert(ahead)

    async with dispatching(deps):
        # ``ahead`` is claimed, its wake-up waiting for its instant, when ``now`` comes in.
        await deps.clock.sleep_until(ahead.scheduled_at - timedelta(seconds=CLAIM_LEAD / 2))
        assert await status_of(store, ahead) is Status.QUEUED
        now = make_job(scheduled_at=deps.clock.now())
        await store.insert(now)
        assert deps.waker is not None
        deps.waker.notify(now.scheduled_at)
        await bus.wait_for(lambda: bool(bus.published))
        published_at = deps.clock.now()
        await bus.wait_for(lambda: len(bus.published) == 2)

    assert bus.published == [wake_up(now), wake_up(ahead)]
    assert published_at == now.scheduled_at
