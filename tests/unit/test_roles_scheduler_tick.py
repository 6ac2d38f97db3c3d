"""The scheduler's tick: claiming due jobs, firing cron templates, publishing wake-ups,
under ``autojump_clock`` (see ``roles_support``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import pytest
import trio
import trio.testing

from jobscheduler.clock import ManualClock
from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.reaper.sweeps import Reaper
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore
from jobscheduler.store.query import Pick
from jobscheduler.store.sqlite import SQLiteJobStore

from .conftest import BASE, DepsFactory, ProxyStore, after, make_job, make_settings, sample
from .roles_support import Barrier, ObservedBus, SplitBrainStore, status_of, wake_up


async def test_tick_claims_due_jobs_by_priority_then_age_and_publishes_a_wake_up_each(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
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
    autojump_clock: trio.testing.MockClock, observed: tuple[Deps, ObservedBus], store: JobStore
) -> None:
    deps, bus = observed
    await store.insert(make_job(scheduled_at=after(1)))
    await store.insert(make_job(status=Status.DLQ))
    assert await Scheduler(deps).tick() == 0
    assert bus.published == []
    assert sample(deps.metrics, "scheduler_jobs_claimed_total") == 0


async def test_cron_template_spawns_an_instance_and_moves_to_its_next_fire_time(
    autojump_clock: trio.testing.MockClock, observed: tuple[Deps, ObservedBus], store: JobStore
) -> None:
    deps, bus = observed
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
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    template = make_job(key="later", cron="*/5 * * * *", scheduled_at=after(300))
    await store.insert(template)
    await trio.sleep(299)
    await Scheduler(deps).tick()
    assert [j.id for j in await store.list_jobs("tenant-a", None, 10)] == [template.id]
    assert sample(deps.metrics, "scheduler_cron_instances_spawned_total") == 0


async def test_cron_template_missed_fire_times_coalesce_into_one_run(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
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
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
    topology: str,
) -> None:
    # Two ticks of one scheduler run on the memory store. Two schedulers with two stores are
    # two processes, each with its own connection to one SQLite file, which the memory store
    # cannot be: that topology runs on SQLite, with a wall clock set by hand, so no virtual
    # time races its threads.
    clock = ManualClock(after(1))
    template = make_job(key="split", cron="*/5 * * * *", scheduled_at=BASE)
    one_off = make_job(scheduled_at=BASE)
    barrier = Barrier(2)
    bus = ObservedBus()  # the one broker both leaders publish to
    opened: list[SQLiteJobStore] = []
    try:
        if topology == "one-scheduler-two-ticks":
            deps = make_deps(store=SplitBrainStore(store, barrier), bus=bus, clock=clock)
            schedulers = [Scheduler(deps), Scheduler(deps)]
            all_deps = [deps]
        else:
            # Simulated split brain: a second process with its own connection to the database.
            for _ in range(2):
                opened.append(SQLiteJobStore(tmp_path / "split.db"))
                await opened[-1].start()
            store = opened[0]
            all_deps = [
                make_deps(store=SplitBrainStore(each, barrier), bus=bus, clock=clock)
                for each in opened
            ]
            schedulers = [Scheduler(deps) for deps in all_deps]
        await store.insert(template)
        await store.insert(one_off)
        async with trio.open_nursery() as nursery:
            for scheduler in schedulers:
                nursery.start_soon(scheduler.tick)

        jobs = await store.list_jobs("tenant-a", None, 100)
        instances = [j for j in jobs if j.idempotency_key.startswith("split-run-")]
        assert [j.idempotency_key for j in instances] == [states.instance_key(template, BASE)]
        assert (await store.get(template.id)).scheduled_at == after(300)
    finally:
        for each in opened:
            await each.close()

    def total(name: str, labels: dict[str, str] | None = None) -> float:
        return sum(sample(d.metrics, name, labels) for d in all_deps)

    assert total("scheduler_cron_instances_spawned_total") == 1
    assert total("jobs_transitions_lost_total", {"transition": "advance_template"}) == 1
    # Every due one-off (the instance included) is claimed and announced exactly once.
    assert sorted(bus.published_ids()) == sorted([instances[0].id, one_off.id])
    assert total("scheduler_jobs_claimed_total") == 2


def store_path(tmp_path: Path) -> Path:
    """The database file the ``sqlite_store`` fixture opened."""
    return tmp_path / "jobs.db"


async def test_hand_edited_invalid_cron_template_is_dead_lettered_and_counted(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
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
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
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
    make_deps: DepsFactory, sqlite_store: SQLiteJobStore, tmp_path: Path
) -> None:
    # A claim and the publish of its wake-ups are one shielded unit: leadership
    # lost (or SIGTERM) once the claim has begun must not leave the claimed jobs queued with
    # no wake-up until QUEUED_TIMEOUT. Here the term ends while the claim waits for SQLite's
    # write lock: the claim completes, and its job is announced. (Before, the claim was
    # withdrawn or, with the Mongo store's unabandonable write, applied unannounced.)
    # On SQLite (its write lock is what keeps the claim waiting), on the real clock.
    store = sqlite_store
    claiming = trio.Event()

    class SignalClaims(ProxyStore):
        async def claim_due(self, now: datetime, limit: int) -> list[Job]:
            claiming.set()
            return await self.inner.claim_due(now, limit)

        async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
            claiming.set()
            return await self.inner.claim_picks(now, picks)

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
