"""The roles (scheduler, executor, reaper, election, waker) on the embedded adapters, in
virtual time.

Single role steps (one tick, one sweep) run under ``autojump_clock``: nothing else runs, so
virtual time moves only when the test sleeps and exact times can be checked. Role loops and
the executor (whose outcome writes sit in a 10 s shield) run under ``patient_clock``, and
the tests wait for events (a publish, an ack, a dead letter) rather than for times; see
``conftest`` for why.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import trio
import trio.testing

from jobscheduler import states
from jobscheduler.api import create_app
from jobscheduler.attempts import Outcome
from jobscheduler.bus import Delivery, Subscription, WakeUp
from jobscheduler.bus.base import DeadLetter
from jobscheduler.bus.local import LocalBus
from jobscheduler.election import Elector, Term, lead
from jobscheduler.errors import BusError, StoreError
from jobscheduler.executor import Executor, run_executor
from jobscheduler.handlers import HandlerRegistry, JobContext, default_registry
from jobscheduler.model import Job, Status
from jobscheduler.reaper import Reaper
from jobscheduler.runtime import Deps, Waker
from jobscheduler.scheduler import Scheduler, run_scheduler
from jobscheduler.store.base import JobStore
from jobscheduler.store.sqlite import SQLiteJobStore

from .conftest import (
    BASE,
    DepsFactory,
    ProxyStore,
    after,
    make_clock,
    make_job,
    make_settings,
    sample,
)

TERM = Term(leader_id="leader-test", token=1)

#: Virtual-time bound on waiting for a role loop to do something (see conftest).
LOOP_BOUND = 600.0


# ----------------------------------------------------------------------- test doubles


class _ObservedDelivery(Delivery):
    def __init__(self, inner: Delivery, bus: ObservedBus) -> None:
        self.message = inner.message
        self._inner = inner
        self._bus = bus

    async def ack(self) -> None:
        await self._inner.ack()
        self._bus.acked.append(self.message)
        self._bus.pulse()

    async def release(self) -> None:
        await self._inner.release()
        self._bus.released.append(self.message)
        self._bus.pulse()


class _ObservedSubscription(Subscription):
    def __init__(self, inner: Subscription, bus: ObservedBus) -> None:
        self._inner = inner
        self._it = aiter(inner)
        self._bus = bus

    def __aiter__(self) -> _ObservedSubscription:
        return self

    async def __anext__(self) -> Delivery:
        return _ObservedDelivery(await anext(self._it), self._bus)

    def receive_ready(self, limit: int) -> list[Delivery]:
        return [_ObservedDelivery(d, self._bus) for d in self._inner.receive_ready(limit)]


class ObservedBus(LocalBus):
    """The local bus, recording what was published, acked and released, and able to fail
    publishes.

    Tests wait on it with :meth:`wait_for` instead of polling.
    """

    def __init__(self) -> None:
        super().__init__()
        self.published: list[WakeUp] = []
        self.acked: list[WakeUp] = []
        self.released: list[WakeUp] = []
        self.fail_publish = False
        self._changed = trio.Event()

    def pulse(self) -> None:
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()

    def published_ids(self) -> list[str]:
        return [m.job_id for m in self.published]

    async def publish(self, messages: Sequence[WakeUp]) -> None:
        if self.fail_publish:
            await trio.lowlevel.checkpoint()
            raise BusError("broker unreachable")
        await super().publish(messages)
        self.published.extend(messages)
        self.pulse()

    async def publish_dead_letter(self, letter: DeadLetter) -> None:
        await super().publish_dead_letter(letter)
        self.pulse()

    @asynccontextmanager
    async def subscribe(self, job_type: str) -> AsyncIterator[Subscription]:
        async with super().subscribe(job_type) as subscription:
            yield _ObservedSubscription(subscription, self)


class ControlledElector(Elector):
    """An elector the test grants and revokes leadership on."""

    def __init__(self) -> None:
        self._grant = trio.Event()
        self._revoke = trio.Event()
        self._resigned_event = trio.Event()
        self.terms = 0
        self.resigned: list[int] = []

    def grant(self) -> None:
        self._grant.set()

    def revoke(self) -> None:
        self._revoke.set()

    async def wait_resigned(self, count: int) -> None:
        while len(self.resigned) < count:
            await self._resigned_event.wait()

    async def start(self) -> None:
        await trio.lowlevel.checkpoint()

    async def close(self) -> None:
        await trio.lowlevel.checkpoint()

    async def campaign(self) -> Term:
        await self._grant.wait()
        self._grant = trio.Event()
        self.terms += 1
        return Term(leader_id="controlled", token=self.terms)

    async def watch(self, term: Term) -> None:
        await self._revoke.wait()
        self._revoke = trio.Event()

    async def resign(self, term: Term) -> None:
        await trio.lowlevel.checkpoint()
        self.resigned.append(term.token)
        resigned, self._resigned_event = self._resigned_event, trio.Event()
        resigned.set()


class Barrier:
    """Holds every caller until ``parties`` have arrived (then lets everyone through)."""

    def __init__(self, parties: int) -> None:
        self._parties = parties
        self._arrived = 0
        self._all_here = trio.Event()

    async def wait(self) -> None:
        self._arrived += 1
        if self._arrived >= self._parties:
            self._all_here.set()
        await self._all_here.wait()


class SplitBrainStore(ProxyStore):
    """Both schedulers read the due templates, and only then may either act on them."""

    def __init__(self, inner: SQLiteJobStore, barrier: Barrier) -> None:
        super().__init__(inner)
        self._barrier = barrier

    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        templates = await self.inner.due_templates(now, limit)
        await self._barrier.wait()
        return templates


# ----------------------------------------------------------------------- helpers


def registry_with(**handlers: Callable[[JobContext], Awaitable[None] | None]) -> HandlerRegistry:
    """The built-ins plus ``handlers`` (underscores in names become dashes)."""
    registry = default_registry()
    for name, func in handlers.items():
        registry.register(name.replace("_", "-"), func)
    return registry


def wake_up(job: Job) -> WakeUp:
    return WakeUp(job_id=job.id, job_type=job.job_type, priority=job.priority)


async def status_of(store: SQLiteJobStore, job: Job) -> Status:
    return (await store.get(job.id)).status


async def queue(deps: Deps, store: SQLiteJobStore, *jobs: Job) -> None:
    """Insert ``jobs`` (due now) and claim them: queued, as after a tick."""
    for job in jobs:
        await store.insert(job)
    claimed = await store.claim_due(deps.clock.now(), len(jobs) + 10)
    assert {j.id for j in claimed} == {j.id for j in jobs}


async def pick_and_start(
    deps: Deps, store: SQLiteJobStore, job: Job, token: str, *, start: bool = True
) -> Job:
    """What an executor (``worker-old``) does when it takes a queued job."""
    now = deps.clock.now()
    changes = [states.pick(job.id, worker="worker-old", token=token, now=now)]
    if start:
        changes.append(states.start(job.id, token=token, now=now))
    results = await store.apply_many(changes)
    last = results[-1]
    assert last is not None
    assert all(r is not None for r in results)
    return last


def hanging_handler() -> tuple[Callable[[JobContext], Awaitable[None]], trio.Event, list[str]]:
    """A handler that runs until cancelled; returns it, its started event, and the ids of
    the jobs whose handler ended."""
    started = trio.Event()
    ended: list[str] = []

    async def hang(ctx: JobContext) -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            ended.append(ctx.job_id)

    return hang, started, ended


# ======================================================================= scheduler: one tick


async def test_tick_claims_due_jobs_by_priority_then_age_and_publishes_a_wake_up_each(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: SQLiteJobStore,
    tmp_path: Path,
) -> None:
    bus = ObservedBus()
    deps = make_deps(bus=bus, settings=make_settings(tmp_path, claim_batch=2))
    low = make_job(priority=1, scheduled_at=after(-10))
    high_new = make_job(priority=5, scheduled_at=after(-5))
    high_old = make_job(priority=5, scheduled_at=after(-20))
    zero = make_job(priority=0, scheduled_at=after(0))
    negative = make_job(priority=-3, scheduled_at=after(-60))
    other_type = make_job(job_type="log-message", payload={"message": "hi"}, priority=2)
    future = make_job(priority=9, scheduled_at=after(60))
    for job in (low, high_new, high_old, zero, negative, other_type, future):
        await store.insert(job)

    claimed = await Scheduler(deps).tick()

    assert claimed == 6
    assert sample(deps.metrics, "scheduler_jobs_claimed_total") == 6
    expected = [high_old, high_new, other_type, low, zero, negative]
    assert bus.published == [wake_up(job) for job in expected]
    for job in expected:
        stored = await store.get(job.id)
        assert stored.status is Status.QUEUED
        assert stored.queued_at == BASE
    assert await status_of(store, future) is Status.PENDING


async def test_tick_with_nothing_due_claims_and_publishes_nothing(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    bus = ObservedBus()
    deps = make_deps(bus=bus)
    await store.insert(make_job(scheduled_at=after(1)))
    await store.insert(make_job(status=Status.DLQ))
    assert await Scheduler(deps).tick() == 0
    assert bus.published == []
    assert sample(deps.metrics, "scheduler_jobs_claimed_total") == 0


async def test_cron_template_spawns_an_instance_and_moves_to_its_next_fire_time(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    bus = ObservedBus()
    deps = make_deps(bus=bus)
    template = make_job(
        key="every-5",
        cron="*/5 * * * *",
        scheduled_at=BASE,
        priority=4,
        payload={"n": 1},
        max_attempts=7,
    )
    await store.insert(template)
    await trio.sleep(1)

    assert await Scheduler(deps).tick() == 1

    moved = await store.get(template.id)
    assert moved.status is Status.PENDING
    assert moved.scheduled_at == after(300)
    assert moved.updated_at == after(1)
    instances = [j for j in await store.list_jobs("tenant-a", None, 10) if j.cron is None]
    assert len(instances) == 1
    instance = instances[0]
    assert instance.idempotency_key == "every-5-run-1767225600000000000"
    assert instance.idempotency_key == states.instance_key(template, BASE)
    assert instance.scheduled_at == BASE
    assert (instance.priority, instance.payload, instance.max_attempts) == (4, {"n": 1}, 7)
    assert instance.status is Status.QUEUED  # due at once: claimed in the same tick
    assert bus.published == [wake_up(instance)]
    assert template.id not in bus.published_ids()  # a template never runs itself
    assert sample(deps.metrics, "scheduler_cron_instances_spawned_total") == 1


async def test_cron_template_is_not_fired_before_its_time(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    deps = make_deps()
    template = make_job(key="later", cron="*/5 * * * *", scheduled_at=after(300))
    await store.insert(template)
    await trio.sleep(299)
    await Scheduler(deps).tick()
    assert [j.id for j in await store.list_jobs("tenant-a", None, 10)] == [template.id]
    assert sample(deps.metrics, "scheduler_cron_instances_spawned_total") == 0


async def test_cron_template_missed_fire_times_coalesce_into_one_run(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    deps = make_deps()
    template = make_job(key="every-5", cron="*/5 * * * *", scheduled_at=BASE)
    await store.insert(template)
    await trio.sleep(3600 + 60)  # the scheduler was down for an hour

    await Scheduler(deps).tick()

    assert (await store.get(template.id)).scheduled_at == after(3600 + 300)
    assert sample(deps.metrics, "scheduler_cron_instances_spawned_total") == 1


@pytest.mark.parametrize("topology", ["one-scheduler-two-ticks", "two-schedulers-two-stores"])
async def test_overlapping_ticks_spawn_one_instance_per_fire_time_and_move_template_once(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: SQLiteJobStore,
    tmp_path: Path,
    topology: str,
) -> None:
    template = make_job(key="split", cron="*/5 * * * *", scheduled_at=BASE)
    one_off = make_job(scheduled_at=BASE)
    await store.insert(template)
    await store.insert(one_off)
    await trio.sleep(1)
    barrier = Barrier(2)
    bus = ObservedBus()  # the one broker both leaders publish to
    second_store: SQLiteJobStore | None = None
    if topology == "one-scheduler-two-ticks":
        deps = make_deps(store=SplitBrainStore(store, barrier), bus=bus)
        schedulers = [Scheduler(deps), Scheduler(deps)]
        all_deps = [deps]
    else:
        # Simulated split brain: a second process with its own connection to the database.
        second_store = SQLiteJobStore(store_path(tmp_path))
        await second_store.start()
        first = make_deps(store=SplitBrainStore(store, barrier), bus=bus)
        second = make_deps(store=SplitBrainStore(second_store, barrier), bus=bus)
        schedulers = [Scheduler(first), Scheduler(second)]
        all_deps = [first, second]
    try:
        async with trio.open_nursery() as nursery:
            for scheduler in schedulers:
                nursery.start_soon(scheduler.tick)
    finally:
        if second_store is not None:
            await second_store.close()

    jobs = await store.list_jobs("tenant-a", None, 100)
    instances = [j for j in jobs if j.idempotency_key.startswith("split-run-")]
    assert [j.idempotency_key for j in instances] == [states.instance_key(template, BASE)]
    assert (await store.get(template.id)).scheduled_at == after(300)

    def total(name: str, labels: dict[str, str] | None = None) -> float:
        return sum(sample(d.metrics, name, labels) for d in all_deps)

    assert total("scheduler_cron_instances_spawned_total") == 1
    assert total("jobs_transitions_lost_total", {"transition": "advance_template"}) == 1
    # Every due one-off (the instance included) is claimed and announced exactly once.
    assert sorted(bus.published_ids()) == sorted([instances[0].id, one_off.id])
    assert total("scheduler_jobs_claimed_total") == 2


def store_path(tmp_path: Path) -> Path:
    """The database file the ``store`` fixture opened."""
    return tmp_path / "jobs.db"


async def test_hand_edited_invalid_cron_template_is_dead_lettered_and_counted(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    deps = make_deps()
    broken = make_job(key="broken", cron="61 * * * *", scheduled_at=BASE)
    healthy = make_job(key="healthy", cron="*/5 * * * *", scheduled_at=BASE)
    await store.insert(broken)
    await store.insert(healthy)
    await trio.sleep(1)
    scheduler = Scheduler(deps)

    await scheduler.tick()
    await scheduler.tick()

    dead = await store.get(broken.id)
    assert dead.status is Status.DLQ
    assert dead.last_error is not None
    assert "cron" in dead.last_error
    assert "61 * * * *" in dead.last_error
    assert sample(deps.metrics, "scheduler_invalid_cron_templates_total") == 1
    keys = {j.idempotency_key for j in await store.list_jobs("tenant-a", None, 100)}
    assert not any(k.startswith("broken-run-") for k in keys)
    # One bad template does not halt the others.
    assert states.instance_key(healthy, BASE) in keys
    assert (await store.get(healthy.id)).scheduled_at == after(300)


async def test_publish_failure_counts_dispatch_errors_and_reaper_re_pends_after_queued_timeout(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    bus = ObservedBus()
    bus.fail_publish = True
    deps = make_deps(bus=bus)
    jobs = [make_job(), make_job(priority=3), make_job(job_type="slow")]
    for job in jobs:
        await store.insert(job)
    scheduler, reaper = Scheduler(deps), Reaper(deps)

    assert await scheduler.tick() == 3
    assert sample(deps.metrics, "scheduler_dispatch_errors_total") == 3
    for job in jobs:
        assert await status_of(store, job) is Status.QUEUED

    await trio.sleep(29)
    assert await reaper.sweep() == {"queued": 0, "claimed": 0}
    for job in jobs:
        assert await status_of(store, job) is Status.QUEUED

    await trio.sleep(2)
    assert await reaper.sweep() == {"queued": 3, "claimed": 0}
    assert sample(deps.metrics, "reaper_recovered_jobs_total", {"sweep": "queued"}) == 3
    for job in jobs:
        stored = await store.get(job.id)
        assert stored.status is Status.PENDING
        assert stored.attempts == 0
        assert stored.queued_at is None

    bus.fail_publish = False
    assert await scheduler.tick() == 3
    assert sorted(bus.published_ids()) == sorted(j.id for j in jobs)
    assert sample(deps.metrics, "scheduler_dispatch_errors_total") == 3


async def test_claim_cancelled_while_waiting_for_the_store_still_publishes_its_wake_ups(
    make_deps: DepsFactory, store: SQLiteJobStore, tmp_path: Path
) -> None:
    # A claim and the publish of its wake-ups are one shielded unit (issue 8): leadership
    # lost (or SIGTERM) once the claim has begun must not leave the claimed jobs queued with
    # no wake-up until QUEUED_TIMEOUT. Here the term ends while the claim waits for SQLite's
    # write lock: the claim completes, and its job is announced. (Before, the claim was
    # withdrawn or, with the Mongo store's unabandonable write, applied unannounced.)
    claiming = trio.Event()

    class SignalClaims(ProxyStore):
        async def claim_due(self, now: datetime, limit: int) -> list[Job]:
            claiming.set()
            return await self.inner.claim_due(now, limit)

    bus = ObservedBus()
    deps = make_deps(store=SignalClaims(store), bus=bus)
    due = make_job()
    await store.insert(due)
    term = trio.CancelScope()

    async def tick_while_leading() -> None:
        with term:
            await Scheduler(deps).tick()

    # Another process holds SQLite's write lock for a moment, so writes queue up.
    blocker = sqlite3.connect(store_path(tmp_path), isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.insert, make_job())  # holds the store's write turn
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(tick_while_leading)
            await claiming.wait()
            await trio.testing.wait_all_tasks_blocked()
            term.cancel()  # leadership lost while the claim waits for the store
            await trio.testing.wait_all_tasks_blocked()
            blocker.execute("ROLLBACK")
    finally:
        blocker.close()

    # Every job the claim queued (``due`` and the job inserted before it) was announced.
    queued = await store.list_jobs("tenant-a", Status.QUEUED, 10)
    assert due.id in {job.id for job in queued}
    assert sorted(bus.published_ids()) == sorted(job.id for job in queued)


# ======================================================================= scheduler: the loop


async def test_job_due_in_the_future_is_dispatched_when_due_and_not_before(
    patient_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: SQLiteJobStore,
    tmp_path: Path,
) -> None:
    # A tick far longer than the wait: the scheduler must plan its wake-up for the due time.
    bus = ObservedBus()
    deps = make_deps(bus=bus, settings=make_settings(tmp_path, scheduler_tick=3600.0))
    job = make_job(scheduled_at=after(60))
    await store.insert(job)

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Scheduler(deps).dispatch_loop, TERM)
            await trio.sleep(59)
            assert bus.published == []
            assert await status_of(store, job) is Status.PENDING
            await bus.wait_for(lambda: bool(bus.published))
            published_at = deps.clock.now()
            nursery.cancel_scope.cancel()

    assert bus.published == [wake_up(job)]
    stored = await store.get(job.id)
    assert stored.status is Status.QUEUED
    assert stored.queued_at is not None
    assert job.scheduled_at <= stored.queued_at <= published_at < after(120)


async def test_job_created_through_the_api_wakes_a_sleeping_scheduler(
    patient_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: SQLiteJobStore,
    tmp_path: Path,
) -> None:
    # With nothing stored the scheduler plans to sleep through a whole hour-long tick.
    bus = ObservedBus()
    deps = make_deps(bus=bus, settings=make_settings(tmp_path, scheduler_tick=3600.0))
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
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    failures = [StoreError("database is locked")]

    class FlakyClaims(ProxyStore):
        async def claim_due(self, now: datetime, limit: int) -> list[Job]:
            if failures:
                await trio.lowlevel.checkpoint()
                raise failures.pop()
            return await self.inner.claim_due(now, limit)

    bus = ObservedBus()
    deps = make_deps(store=FlakyClaims(store), bus=bus)
    job = make_job()
    await store.insert(job)
    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Scheduler(deps).dispatch_loop, TERM)
            await bus.wait_for(lambda: bool(bus.published))
            nursery.cancel_scope.cancel()
    assert failures == []
    assert bus.published == [wake_up(job)]
    assert await status_of(store, job) is Status.QUEUED


async def test_bug_store_error_from_next_due_at_crashes_the_dispatch_loop(
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
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
    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Scheduler(deps).dispatch_loop, TERM)
            await failed.wait()
            await store.insert(job)
            await bus.wait_for(lambda: bool(bus.published))
            nursery.cancel_scope.cancel()
    assert bus.published == [wake_up(job)]


# ======================================================================= executor


async def test_failing_handler_retries_with_backoff_then_dead_letters(
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    calls: list[tuple[int, int]] = []

    async def boom(ctx: JobContext) -> None:
        calls.append((ctx.attempt, ctx.max_attempts))
        await trio.lowlevel.checkpoint()
        raise RuntimeError("kaput")

    bus = ObservedBus()
    deps = make_deps(bus=bus, registry=registry_with(boom=boom))
    executor = Executor(deps)
    job = make_job(job_type="boom", max_attempts=2)
    await queue(deps, store, job)

    assert await executor.run(wake_up(job)) == "retried"
    retried = await store.get(job.id)
    assert retried.status is Status.PENDING
    assert retried.attempts == 1
    assert retried.last_error == "RuntimeError: kaput"
    assert retried.claim_token is None
    assert retried.scheduled_at == retried.updated_at + timedelta(seconds=2)

    # The retry is claimable at its backoff time, not a millisecond before.
    just_before = retried.scheduled_at - timedelta(milliseconds=1)
    assert await store.claim_due(just_before, 10) == []
    assert [j.id for j in await store.claim_due(retried.scheduled_at, 10)] == [job.id]

    assert await executor.run(wake_up(job)) == "dlq"
    dead = await store.get(job.id)
    assert dead.status is Status.DLQ
    assert dead.attempts == 2
    assert dead.last_error == "RuntimeError: kaput"
    assert list(bus.dead_letters) == [
        DeadLetter(
            job_id=job.id,
            job_type="boom",
            tenant_id="tenant-a",
            attempts=2,
            last_error="RuntimeError: kaput",
        )
    ]
    assert calls == [(1, 2), (2, 2)]
    for result in ("retried", "dlq"):
        labels = {"job_type": "boom", "result": result}
        assert sample(deps.metrics, "executor_jobs_processed_total", labels) == 1
    assert await store.claim_due(dead.updated_at + timedelta(days=1), 10) == []


async def test_successful_handler_completes_the_job_and_drops_the_token(
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    contexts: list[JobContext] = []

    async def record(ctx: JobContext) -> dict[str, int]:
        contexts.append(ctx)
        await trio.lowlevel.checkpoint()
        return {"sent": 3}

    deps = make_deps(registry=registry_with(record=record))
    job = make_job(job_type="record", payload={"x": [1]}, tenant="tenant-z")
    await queue(deps, store, job)

    assert await Executor(deps).run(wake_up(job)) == "completed"

    done = await store.get(job.id)
    assert done.status is Status.COMPLETED
    assert done.claim_token is None
    assert done.claimed_by == "worker-test"
    assert done.claimed_at is not None
    assert done.attempts == 1  # attempts started, as the handler's ctx.attempt said
    assert done.result == {"sent": 3}
    [ctx] = contexts
    assert (ctx.job_id, ctx.tenant_id, ctx.job_type) == (job.id, "tenant-z", "record")
    assert ctx.payload == {"x": [1]}
    assert (ctx.attempt, ctx.max_attempts) == (1, 3)
    assert (ctx.idempotency_key, ctx.scheduled_at) == (job.idempotency_key, job.scheduled_at)
    assert ctx.template_id is None
    [attempt] = await store.attempts(job.id)
    assert (attempt.number, attempt.outcome, attempt.worker) == (
        1,
        Outcome.COMPLETED,
        "worker-test",
    )
    assert attempt.started_at == done.claimed_at
    labels = {"job_type": "record", "result": "completed"}
    assert sample(deps.metrics, "executor_jobs_processed_total", labels) == 1


async def test_sync_handlers_with_run_in_thread_run_in_a_worker_thread(
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    threads: list[int] = []

    def blocking(ctx: JobContext) -> None:
        threads.append(threading.get_ident())

    def blocking_fail(ctx: JobContext) -> None:
        raise ValueError("sync failure")

    registry = default_registry()
    registry.register("blocking", blocking, run_in="thread")
    registry.register("blocking-fail", blocking_fail, run_in="thread")
    deps = make_deps(registry=registry)
    ok, bad = make_job(job_type="blocking"), make_job(job_type="blocking-fail")
    await queue(deps, store, ok, bad)
    executor = Executor(deps)

    assert await executor.run(wake_up(ok)) == "completed"
    assert await executor.run(wake_up(bad)) == "retried"

    assert len(threads) == 1
    assert threads[0] != threading.get_ident()
    assert await status_of(store, ok) is Status.COMPLETED
    assert (await store.get(bad.id)).last_error == "ValueError: sync failure"


async def test_unknown_and_duplicate_wake_ups_are_acked_and_counted_stale(
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    bus = ObservedBus()
    deps = make_deps(bus=bus)
    job = make_job()
    await queue(deps, store, job)
    unknown = WakeUp(job_id="0123456789abcdef01234567", job_type="noop", priority=0)

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(Executor(deps).consume, "noop")
            await bus.publish([wake_up(job), wake_up(job), unknown])
            await bus.wait_for(lambda: len(bus.acked) == 3)
            nursery.cancel_scope.cancel()

    assert sorted(m.job_id for m in bus.acked) == sorted([job.id, job.id, unknown.job_id])
    assert await status_of(store, job) is Status.COMPLETED
    processed = "executor_jobs_processed_total"
    assert sample(deps.metrics, processed, {"job_type": "noop", "result": "completed"}) == 1
    assert sample(deps.metrics, processed, {"job_type": "noop", "result": "stale"}) == 2
    assert sample(deps.metrics, "jobs_transitions_lost_total", {"transition": "pick"}) == 2


class RecordingStore(ProxyStore):
    """Records the transitions of every apply_many round trip, and can fail the next one
    that carries a given transition."""

    def __init__(self, inner: JobStore) -> None:
        super().__init__(inner)
        self.round_trips: list[list[str]] = []
        self.fail_on: str | None = None
        self.failed = trio.Event()

    async def apply_many(self, changes: Sequence[states.Change]) -> list[Job | None]:
        transitions = [change.transition for change in changes]
        self.round_trips.append(transitions)
        if self.fail_on in transitions:
            self.fail_on = None
            self.failed.set()
            await trio.lowlevel.checkpoint()
            raise StoreError("disk I/O error")
        return await self.inner.apply_many(changes)


async def test_waiting_wake_ups_are_picked_and_settled_in_shared_round_trips(
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    bus = ObservedBus()
    recording = RecordingStore(store)
    deps = make_deps(store=recording, bus=bus)  # executor_concurrency 8
    jobs = [make_job() for _ in range(12)]
    await queue(deps, store, *jobs)
    await bus.publish([wake_up(job) for job in jobs])

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(Executor(deps).consume, "noop")
            await bus.wait_for(lambda: len(bus.acked) == len(jobs))
            nursery.cancel_scope.cancel()

    for job in jobs:
        assert await status_of(store, job) is Status.COMPLETED
    picks = [trip for trip in recording.round_trips if "pick" in trip]
    # The first message brings the 7 waiting behind it (8 handlers at most); the rest follow.
    assert [trip.count("pick") for trip in picks] == [8, 4]
    assert all(trip == ["pick", "start"] * (len(trip) // 2) for trip in picks)
    completes = [trip for trip in recording.round_trips if "complete" in trip]
    assert sum(len(trip) for trip in completes) == len(jobs)
    assert len(completes) < len(jobs)
    labels = {"job_type": "noop", "result": "completed"}
    assert sample(deps.metrics, "executor_jobs_processed_total", labels) == len(jobs)


async def test_an_outcome_write_that_fails_once_is_retried_then_written_and_acked(
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    bus = ObservedBus()
    recording = RecordingStore(store)
    recording.fail_on = "complete"
    deps = make_deps(store=recording, bus=bus)
    job = make_job()
    await queue(deps, store, job)

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(Executor(deps).consume, "noop")
            await bus.publish([wake_up(job)])
            await bus.wait_for(lambda: len(bus.acked) == 1)
            nursery.cancel_scope.cancel()

    assert recording.failed.is_set()
    assert [trip for trip in recording.round_trips if "complete" in trip] == [["complete"]] * 2
    assert bus.acked == [wake_up(job)]
    assert bus.released == []
    assert await status_of(store, job) is Status.COMPLETED
    labels = {"job_type": "noop", "result": "completed"}
    assert sample(deps.metrics, "executor_jobs_processed_total", labels) == 1


async def test_running_handler_heartbeats_so_its_job_is_not_stale(
    patient_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: SQLiteJobStore,
    tmp_path: Path,
) -> None:
    deps = make_deps(settings=make_settings(tmp_path, heartbeat_interval=10.0))
    job = make_job(job_type="slow", payload={"sleepMs": 35_000})
    await queue(deps, store, job)
    executor = Executor(deps)
    results: list[str] = []
    finished = trio.Event()

    async def run() -> None:
        results.append(await executor.run(wake_up(job)))
        finished.set()

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(executor.heartbeat_loop)
            nursery.start_soon(run)
            await finished.wait()
            nursery.cancel_scope.cancel()

    assert results == ["completed"]
    done = await store.get(job.id)
    assert done.status is Status.COMPLETED
    assert done.claimed_at is not None
    assert done.heartbeat_at is not None
    assert done.heartbeat_at > done.claimed_at


async def test_heartbeat_that_finds_the_token_gone_cancels_the_handler(
    patient_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: SQLiteJobStore,
    tmp_path: Path,
) -> None:
    hang, started, ended = hanging_handler()
    deps = make_deps(
        registry=registry_with(hang=hang),
        settings=make_settings(tmp_path, heartbeat_interval=1.0),
    )
    job = make_job(job_type="hang")
    await queue(deps, store, job)
    executor = Executor(deps)
    results: list[str] = []
    finished = trio.Event()

    async def run() -> None:
        results.append(await executor.run(wake_up(job)))
        finished.set()

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(executor.heartbeat_loop)
            nursery.start_soon(run)
            await started.wait()
            # The reaper takes the job back, as if the heartbeats had stopped arriving.
            recovered: Job | None = None
            while recovered is None:  # conditional on the heartbeat it saw
                running = await store.get(job.id)
                assert running.status is Status.RUNNING
                recovered = await store.apply(states.recover(running, now=deps.clock.now()))
            await finished.wait()
            nursery.cancel_scope.cancel()

    assert results == ["stale"]
    assert ended == [job.id]
    after_reaper = await store.get(job.id)
    assert after_reaper == recovered  # the cancelled attempt wrote nothing afterwards
    assert after_reaper.status is Status.PENDING
    assert after_reaper.attempts == 1
    labels = {"job_type": "hang", "result": "stale"}
    assert sample(deps.metrics, "executor_jobs_processed_total", labels) == 1


async def test_cancelled_executor_releases_its_running_job_without_counting_an_attempt(
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    hang, started, ended = hanging_handler()
    deps = make_deps(registry=registry_with(hang=hang))
    job = make_job(job_type="hang", attempts=1)
    await queue(deps, store, job)

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Executor(deps).run, wake_up(job))
            await started.wait()
            nursery.cancel_scope.cancel()

    assert ended == [job.id]
    released = await store.get(job.id)
    assert released.status is Status.PENDING
    assert released.attempts == 1
    assert released.claim_token is None
    assert released.scheduled_at == released.updated_at  # due again at once
    [record] = await store.attempts(job.id)
    assert (record.number, record.outcome) == (2, Outcome.RELEASED)  # its number, uncounted
    labels = {"job_type": "hang", "result": "released"}
    assert sample(deps.metrics, "executor_jobs_processed_total", labels) == 1


async def test_roles_together_run_a_failing_job_to_the_dead_letter_queue(
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    async def always_fails(ctx: JobContext) -> None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError(f"attempt {ctx.attempt} failed")

    bus = ObservedBus()
    deps = make_deps(bus=bus, registry=registry_with(always_fails=always_fails))
    job = make_job(job_type="always-fails", max_attempts=3)
    await store.insert(job)

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_executor, deps, ["always-fails"])
            nursery.start_soon(Scheduler(deps).dispatch_loop, TERM)
            await bus.wait_for(lambda: len(bus.dead_letters) == 1)
            nursery.cancel_scope.cancel()

    dead = await store.get(job.id)
    assert dead.status is Status.DLQ
    assert dead.attempts == 3
    assert dead.last_error == "RuntimeError: attempt 3 failed"
    # Two backoffs (2 s, then 4 s) lie between the first and the last attempt.
    assert dead.updated_at >= BASE + timedelta(seconds=6)
    assert bus.published_ids() == [job.id] * 3
    records = await store.attempts(job.id)
    assert [(r.number, r.outcome, r.error_type) for r in records] == [
        (n, Outcome.FAILED, "RuntimeError") for n in (1, 2, 3)
    ]
    assert [r.error_message for r in records] == [f"attempt {n} failed" for n in (1, 2, 3)]
    for record in records:
        assert record.traceback is not None
        assert "in always_fails" in record.traceback
    processed = "executor_jobs_processed_total"
    labels = {"job_type": "always-fails"}
    assert sample(deps.metrics, processed, {**labels, "result": "retried"}) == 2
    assert sample(deps.metrics, processed, {**labels, "result": "dlq"}) == 1


# ======================================================================= reaper


async def test_reaper_recovers_stale_claimed_and_running_jobs_and_leaves_live_ones(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    bus = ObservedBus()
    deps = make_deps(bus=bus)
    running_stale = make_job()
    claimed_stale = make_job()
    last_attempt = make_job(attempts=2, max_attempts=3)
    heartbeating = make_job()
    await queue(deps, store, running_stale, claimed_stale, last_attempt, heartbeating)
    old_run = await pick_and_start(deps, store, running_stale, "tok-a")
    await pick_and_start(deps, store, claimed_stale, "tok-b", start=False)
    await pick_and_start(deps, store, last_attempt, "tok-c")
    await pick_and_start(deps, store, heartbeating, "tok-d")

    await trio.sleep(301)
    now = deps.clock.now()
    assert await store.apply(states.heartbeat(heartbeating.id, token="tok-d", now=now))

    assert await Reaper(deps).sweep() == {"queued": 0, "claimed": 3}

    # A running job's attempt was counted when it started and fails as lost (backoff); a
    # job that never got past claimed goes back at once, uncounted.
    for job, delay, attempts in ((running_stale, 2, 1), (claimed_stale, 0, 0)):
        stored = await store.get(job.id)
        assert stored.status is Status.PENDING
        assert stored.attempts == attempts
        assert stored.claim_token is None
        assert stored.scheduled_at == now + timedelta(seconds=delay)
        assert stored.last_error is not None
        assert stored.last_error.startswith("lost: executor worker-old stopped heartbeating")
        [lost] = await store.attempts(job.id)
        assert (lost.number, lost.outcome, lost.worker) == (1, Outcome.LOST, "worker-old")
        assert lost.error_message == stored.last_error
    dead = await store.get(last_attempt.id)
    assert dead.status is Status.DLQ
    assert dead.attempts == 3
    assert [d.job_id for d in bus.dead_letters] == [last_attempt.id]
    live = await store.get(heartbeating.id)
    assert live.status is Status.RUNNING
    assert live.claim_token == "tok-d"
    assert live.attempts == 1
    assert await store.attempts(heartbeating.id) == []
    assert sample(deps.metrics, "reaper_recovered_jobs_total", {"sweep": "claimed"}) == 3

    # The old executor's late outcome cannot overwrite the recovery.
    assert await store.apply(states.complete(old_run, token="tok-a", now=now)) is None
    # A second sweep finds nothing more to do.
    assert await Reaper(deps).sweep() == {"queued": 0, "claimed": 0}


async def test_reaper_leaves_jobs_alone_until_their_timeouts_pass(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    deps = make_deps()
    queued_job, running_job = make_job(), make_job()
    await queue(deps, store, queued_job, running_job)
    await pick_and_start(deps, store, running_job, "tok")
    reaper = Reaper(deps)

    await trio.sleep(29)
    assert await reaper.sweep() == {"queued": 0, "claimed": 0}
    await trio.sleep(2)
    assert await reaper.sweep() == {"queued": 1, "claimed": 0}
    await trio.sleep(300 - 31 - 1)
    assert await reaper.sweep() == {"queued": 0, "claimed": 0}
    assert await status_of(store, running_job) is Status.RUNNING
    await trio.sleep(2)
    assert await reaper.sweep() == {"queued": 0, "claimed": 1}


async def test_reaper_recovery_wakes_the_scheduler(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: SQLiteJobStore
) -> None:
    deps = make_deps()
    assert deps.waker is not None
    await queue(deps, store, make_job())
    await trio.sleep(31)

    assert await Reaper(deps).sweep() == {"queued": 1, "claimed": 0}

    swept_at = deps.clock.now()
    await deps.waker.sleep_until(after(10_000))  # the scheduler's next sleep ends at once
    assert deps.clock.now() == swept_at


async def test_reaper_with_nothing_to_recover_does_not_wake_the_scheduler(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory
) -> None:
    deps = make_deps()
    assert deps.waker is not None
    assert await Reaper(deps).sweep() == {"queued": 0, "claimed": 0}
    await deps.waker.sleep_until(after(100))
    assert deps.clock.now() == after(100)


# ======================================================================= election


async def test_scheduler_is_leader_gauge_is_one_while_leading_and_zero_after(
    patient_clock: trio.testing.MockClock, make_deps: DepsFactory
) -> None:
    deps = make_deps()
    async with trio.open_nursery() as nursery:
        await nursery.start(run_scheduler, deps)
        await trio.testing.wait_all_tasks_blocked()
        assert sample(deps.metrics, "scheduler_is_leader") == 1
        nursery.cancel_scope.cancel()
    assert sample(deps.metrics, "scheduler_is_leader") == 0


async def test_losing_leadership_stops_dispatch_until_leadership_returns(
    patient_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: SQLiteJobStore,
    tmp_path: Path,
) -> None:
    elector = ControlledElector()
    bus = ObservedBus()
    deps = make_deps(
        elector=elector, bus=bus, settings=make_settings(tmp_path, scheduler_tick=10.0)
    )

    def leading() -> float:
        return sample(deps.metrics, "scheduler_is_leader")

    first, second = make_job(), make_job()
    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_scheduler, deps)
            await store.insert(first)
            await trio.sleep(30)
            assert leading() == 0
            assert bus.published == []  # a standby never dispatches

            elector.grant()
            await bus.wait_for(lambda: first.id in bus.published_ids())
            assert leading() == 1

            elector.revoke()
            await elector.wait_resigned(1)
            assert leading() == 0
            await store.insert(second)
            await trio.sleep(30)
            assert second.id not in bus.published_ids()
            assert await status_of(store, second) is Status.PENDING

            elector.grant()
            await bus.wait_for(lambda: second.id in bus.published_ids())
            assert leading() == 1
            nursery.cancel_scope.cancel()
    assert leading() == 0
    assert elector.resigned == [1, 2]
    assert bus.published_ids() == [first.id, second.id]


async def test_lead_resigns_and_reports_loss_when_work_fails(
    autojump_clock: trio.testing.MockClock,
) -> None:
    elector = ControlledElector()
    changes: list[bool] = []

    async def work(term: Term) -> None:
        await trio.lowlevel.checkpoint()
        raise StoreError("boom")

    elector.grant()
    with pytest.RaisesGroup(StoreError, allow_unwrapped=True, flatten_subgroups=True):
        await lead(elector, work, on_leadership=changes.append)
    assert changes == [True, False]
    assert elector.resigned == [1]


# ======================================================================= waker


async def test_waker_notify_of_an_earlier_due_time_wakes_the_sleeper_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = make_clock()
    waker = Waker(clock)
    woke: list[datetime] = []

    async def sleeper() -> None:
        await waker.sleep_until(after(100))
        woke.append(clock.now())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sleeper)
        await trio.sleep(10)
        waker.notify(after(20))
    assert woke == [after(10)]


async def test_waker_notify_of_a_later_due_time_does_not_wake_the_sleeper(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = make_clock()
    waker = Waker(clock)
    woke: list[datetime] = []

    async def sleeper() -> None:
        await waker.sleep_until(after(100))
        woke.append(clock.now())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sleeper)
        await trio.sleep(10)
        waker.notify(after(100))
        waker.notify(after(500))
    assert woke == [after(100)]


async def test_waker_notify_while_awake_ends_only_the_next_sleep_by_that_due_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = make_clock()
    waker = Waker(clock)
    waker.notify(after(50))  # the scheduler is busy ticking: it must not miss this
    waker.notify(after(70))
    await waker.sleep_until(after(100))
    assert clock.now() == after(50)
    await waker.sleep_until(after(150))
    assert clock.now() == after(150)


async def test_waker_notify_while_awake_of_an_already_due_job_ends_the_next_sleep_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = make_clock()
    waker = Waker(clock)
    waker.notify(after(-1))
    await waker.sleep_until(after(100))
    assert clock.now() == BASE


async def test_waker_notify_while_awake_of_a_job_due_after_the_next_sleep_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Regression (issue 13): every create of a job due later woke the scheduler for a
    needless tick (four store reads) while it was busy, so under create load it never slept."""
    clock = make_clock()
    waker = Waker(clock)
    for seconds in (5000, 86_400, 100):
        waker.notify(after(seconds))
    await waker.sleep_until(after(100))
    assert clock.now() == after(100)


async def test_waker_sleep_until_a_past_deadline_returns_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = make_clock()
    await Waker(clock).sleep_until(after(-5))
    assert clock.now() == BASE


async def test_reaper_prunes_attempt_records_older_than_the_retention(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: SQLiteJobStore,
    tmp_path: Path,
) -> None:
    deps = make_deps(settings=make_settings(tmp_path, attempt_retention=3600.0))
    old, recent = make_job(), make_job()
    await queue(deps, store, old)
    assert await Executor(deps).run(wake_up(old)) == "completed"
    await trio.sleep(1800)
    await queue(deps, store, recent)
    assert await Executor(deps).run(wake_up(recent)) == "completed"

    await trio.sleep(1801)  # old's record is now 3601 s old, recent's 1801 s
    await Reaper(deps).sweep()

    assert await store.attempts(old.id) == []
    assert [a.outcome for a in await store.attempts(recent.id)] == [Outcome.COMPLETED]
    assert (await store.get(old.id)).status is Status.COMPLETED  # the job itself stays
