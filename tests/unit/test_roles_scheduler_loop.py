"""The scheduler's dispatch loop: sleeping until the next due time, waking on new jobs,
surviving store errors; under ``autojump_clock`` (see ``roles_support``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pytest
import trio
import trio.testing

from jobscheduler.api import create_app
from jobscheduler.domain.model import Job, Status
from jobscheduler.errors import StoreError
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore
from jobscheduler.store.query import PassReads, Pick

from .conftest import DepsFactory, ProxyStore, after, make_job
from .roles_support import LOOP_BOUND, TERM, ObservedBus, dispatching, status_of, wake_up


async def test_job_due_in_the_future_is_dispatched_when_due_and_not_before(
    autojump_clock: trio.testing.MockClock, long_tick: tuple[Deps, ObservedBus], store: JobStore
) -> None:
    # A tick far longer than the wait: the scheduler must plan its wake-up for the due time.
    deps, bus = long_tick
    job = make_job(scheduled_at=after(60))
    await store.insert(job)

    async with dispatching(deps):
        await trio.sleep(59)
        assert bus.published == []
        assert await status_of(store, job) is Status.PENDING
        await bus.wait_for(lambda: bool(bus.published))
        published_at = deps.clock.now()

    assert bus.published == [wake_up(job)]
    stored = await store.get(job.id)
    assert stored.status is Status.QUEUED
    assert stored.queued_at is not None
    assert job.scheduled_at <= stored.queued_at <= published_at < after(120)


async def test_job_created_through_the_api_wakes_a_sleeping_scheduler(
    autojump_clock: trio.testing.MockClock, long_tick: tuple[Deps, ObservedBus], store: JobStore
) -> None:
    # With nothing stored the scheduler plans to sleep through a whole hour-long tick.
    deps, bus = long_tick
    app = create_app(deps)
    # The nursery is left (cancelled) before the test app: quart-trio's test app enters
    # its own nursery by hand and must not be cancelled from outside.
    with trio.fail_after(LOOP_BOUND):
        async with app.test_app() as test_app, trio.open_nursery() as nursery:
            nursery.start_soon(Scheduler(deps).dispatch_loop, TERM)
            await trio.sleep(10)
            response = await test_app.test_client().post(
                "/jobs",
                json={
                    "idempotencyKey": "wake-me",
                    "tenantId": "tenant-a",
                    "jobType": "noop",
                    "scheduledAt": "2025-12-31T00:00:00Z",
                },
            )
            assert response.status_code == 201
            job_id = (await response.get_json())["id"]
            await bus.wait_for(lambda: bool(bus.published))
            nursery.cancel_scope.cancel()

    assert bus.published_ids() == [job_id]
    stored = await store.get(job_id)
    assert stored.queued_at is not None
    assert stored.queued_at < after(60), "claimed only at the next tick: no wake-up"


async def test_dispatch_loop_backs_off_and_continues_after_a_store_error_in_a_tick(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    failures = [StoreError("database is locked")]

    class FlakyClaims(ProxyStore):
        async def claim_due(self, now: datetime, limit: int) -> list[Job]:
            if failures:
                await trio.lowlevel.checkpoint()
                raise failures.pop()
            return await self.inner.claim_due(now, limit)

        async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
            if failures:
                await trio.lowlevel.checkpoint()
                raise failures.pop()
            return await self.inner.claim_picks(now, picks)

    bus = ObservedBus()
    deps = make_deps(store=FlakyClaims(store), bus=bus)
    job = make_job()
    await store.insert(job)
    async with dispatching(deps):
        await bus.wait_for(lambda: bool(bus.published))
    assert failures == []
    assert bus.published == [wake_up(job)]
    assert await status_of(store, job) is Status.QUEUED


async def test_bug_store_error_from_next_due_at_crashes_the_dispatch_loop(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    # Bug: Scheduler.dispatch_loop catches StoreError only around tick(); the store read in
    # _sleep() (next_due_at) is outside that try, so one transient store error ends the
    # dispatch loop (and, through lead() and run_roles, the whole `dev` process) instead of
    # being logged and retried after ERROR_BACKOFF like a failed tick.
    failed = trio.Event()

    class FlakyNextDue(ProxyStore):
        async def next_due_at(self) -> datetime | None:
            if not failed.is_set():
                failed.set()
                await trio.lowlevel.checkpoint()
                raise StoreError("database is locked")
            return await self.inner.next_due_at()

    bus = ObservedBus()
    deps = make_deps(store=FlakyNextDue(store), bus=bus)
    job = make_job()
    async with dispatching(deps):
        await failed.wait()
        await store.insert(job)
        await bus.wait_for(lambda: bool(bus.published))
    assert bus.published == [wake_up(job)]


class CountingReads(ProxyStore):
    """Counts the scheduler's separate reads; :meth:`pass_reads` goes to the inner store."""

    def __init__(self, inner: JobStore) -> None:
        super().__init__(inner)
        self.calls: list[str] = []

    async def pass_reads(self, now: datetime) -> PassReads:
        self.calls.append("pass_reads")
        return await self.inner.pass_reads(now)

    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        self.calls.append("due_templates")
        return await self.inner.due_templates(now, limit)

    async def buffered_templates(self, limit: int) -> list[Job]:
        self.calls.append("buffered_templates")
        return await self.inner.buffered_templates(limit)

    async def next_due_at(self) -> datetime | None:
        self.calls.append("next_due_at")
        return await self.inner.next_due_at()


@pytest.fixture
def counted(make_deps: DepsFactory, store: JobStore) -> tuple[Deps, ObservedBus, CountingReads]:
    """Deps on an observed bus and a store that counts the scheduler's reads."""
    counting = CountingReads(store)
    bus = ObservedBus()
    return make_deps(store=counting, bus=bus), bus, counting


async def test_a_pass_that_finds_no_template_makes_one_read_besides_its_claim(
    autojump_clock: trio.testing.MockClock, counted: tuple[Deps, ObservedBus, CountingReads]
) -> None:
    deps, bus, counting = counted
    store = counting.inner  # the store itself, its writes uncounted
    job = make_job()
    await store.insert(job)
    async with dispatching(deps):
        await bus.wait_for(lambda: bool(bus.published))
        await trio.sleep(0.5)  # the pass's sleep has begun
    assert bus.published == [wake_up(job)]
    assert set(counting.calls) == {"pass_reads"}


async def test_a_due_template_is_still_fired_after_the_one_read(
    autojump_clock: trio.testing.MockClock, counted: tuple[Deps, ObservedBus, CountingReads]
) -> None:
    deps, bus, counting = counted
    store = counting.inner  # the store itself, its writes uncounted
    template = await store.insert(make_job(cron="* * * * *", scheduled_at=after(-1)))
    async with dispatching(deps):
        await bus.wait_for(lambda: bool(bus.published))
    assert counting.calls[:2] == ["pass_reads", "due_templates"]
    assert "next_due_at" in counting.calls  # read again after the template moved
    assert (await store.get(template.id)).scheduled_at > template.scheduled_at
