"""The scheduler's claim and the publish of its wake-ups are one shielded, bounded unit:
leadership loss or shutdown between them must not leave claimed jobs queued with no wake-up
until QUEUED_TIMEOUT."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pytest
import trio
import trio.testing

from jobscheduler.bus import WakeUp
from jobscheduler.domain.model import Job, Status
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.scheduler.loop import PUBLISH_TIMEOUT, Scheduler
from jobscheduler.store import JobStore
from jobscheduler.store.query import Pick

from .conftest import DepsFactory, ProxyStore, make_job, sample
from .roles_support import ObservedBus, status_of


async def test_leadership_lost_between_claim_and_publish_still_publishes_every_wake_up(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    term = trio.CancelScope()

    class LoseLeadershipAfterClaim(ProxyStore):
        async def claim_due(self, now: datetime, limit: int) -> list[Job]:
            claimed = await self.inner.claim_due(now, limit)
            term.cancel()  # the elector cancels dispatch right after the claim landed
            return claimed

        async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
            claimed = await self.inner.claim_picks(now, picks)
            term.cancel()  # the same, for the fair claim's write
            return claimed

    bus = ObservedBus()
    deps = make_deps(store=LoseLeadershipAfterClaim(store), bus=bus)
    jobs = [make_job() for _ in range(5)]
    for job in jobs:
        await store.insert(job)

    with term:
        await Scheduler(deps).tick()

    assert sorted(bus.published_ids()) == sorted(j.id for j in jobs)
    for job in jobs:
        assert await status_of(store, job) is Status.QUEUED


async def test_scheduler_that_lost_leadership_before_a_claim_claims_nothing(
    autojump_clock: trio.testing.MockClock, observed: tuple[Deps, ObservedBus], store: JobStore
) -> None:
    deps, bus = observed
    due = make_job()
    await store.insert(due)

    with trio.CancelScope() as term:
        term.cancel()
        await Scheduler(deps).tick()

    assert bus.published == []
    assert await status_of(store, due) is Status.PENDING


async def test_publish_that_hangs_is_bounded_and_leaves_the_jobs_queued_for_the_reaper(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    publishing = trio.Event()

    class HangingBus(ObservedBus):
        async def publish(self, messages: Sequence[WakeUp]) -> None:
            publishing.set()
            await trio.sleep_forever()

    deps = make_deps(bus=HangingBus())
    due = make_job()
    await store.insert(due)

    with trio.CancelScope() as term:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Scheduler(deps).tick)
            await publishing.wait()
            began = trio.current_time()
            term.cancel()  # shutdown while the publish hangs: the unit still ends in time

    assert trio.current_time() - began == pytest.approx(PUBLISH_TIMEOUT)
    assert sample(deps.metrics, "scheduler_dispatch_errors_total") == 1
    assert await status_of(store, due) is Status.QUEUED
