"""Cron templates meeting the manage actions, on the memory store in virtual time:
fire times passed over while a template was paused are recorded in its ledger when it is
resumed (reason ``paused``), and ``overlap="cancel_previous"`` cancels the previous unfinished
run through the cancel transitions (at once, or by a cancel request its executor honours
within a heartbeat) and records which run it cancelled."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from jobscheduler.api import actions
from jobscheduler.clock import TrioClock
from jobscheduler.domain import cron, states
from jobscheduler.domain.cron import CatchUp, Overlap
from jobscheduler.domain.model import Status
from jobscheduler.handlers import JobContext
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore
from jobscheduler.store.jobs import OccurrenceQuery
from jobscheduler.store.sqlite import SQLiteJobStore
from tests.support.stores import started

from .conftest import BASE, DepsFactory, after, sample
from .cron_ledger_support import finish, ledger, summary, tick_at
from .roles_support import Barrier, SplitBrainStore, reached, registry_of, wake_up
from .test_cron_scheduler import EVERY_5, keys, runs_of, template

CANCEL = Overlap.CANCEL_PREVIOUS


# ------------------------------------------------------------------------- paused


async def test_resume_records_the_fire_times_passed_while_paused_as_skipped_paused(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    scheduler = Scheduler(deps)
    tmpl = await store.insert(template("paused", EVERY_5, BASE))
    await tick_at(scheduler, 1)  # 00:00 runs; the template moves to 00:05
    await actions.pause(deps, await store.get(tmpl.id))
    await trio.sleep(1000)  # 00:05 .. 00:15 pass while paused (now 00:16:41)
    assert await scheduler.tick() == 0

    resumed = await actions.resume(deps, await store.get(tmpl.id))
    assert resumed.job.scheduled_at == after(1200)
    again = await actions.resume(deps, resumed.job)  # a repeated resume: a no-op
    assert not again.changed

    assert summary(await ledger(store, tmpl)) == [
        (BASE, "spawned", None),
        *[(after(s), "skipped", "paused") for s in (300, 600, 900)],
    ]
    assert sample(deps.metrics, "scheduler_cron_skipped_total", {"reason": "paused"}) == 3
    await tick_at(scheduler, 1201)  # and it fires on from its next fire time
    assert [r.fire_at for r in await ledger(store, tmpl)][-1] == after(1200)
    assert len(await runs_of(store, tmpl)) == 2


async def test_a_resume_before_the_next_fire_time_records_nothing(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    tmpl = await store.insert(template("short-pause", EVERY_5, after(300)))
    await actions.pause(deps, tmpl)
    await trio.sleep(120)
    resumed = await actions.resume(deps, await store.get(tmpl.id))
    assert resumed.job.scheduled_at == after(300)
    assert await ledger(store, tmpl) == []


# ------------------------------------------------------------------------- cancel_previous


@pytest.mark.parametrize("previous", [Status.QUEUED, Status.CLAIMED])
async def test_a_previous_run_no_executor_runs_yet_is_cancelled_when_the_next_fire_time_comes(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    previous: Status,
) -> None:
    deps = make_deps()
    scheduler = Scheduler(deps)
    tmpl = await store.insert(template("replace", EVERY_5, BASE, overlap=CANCEL))
    await tick_at(scheduler, 1)
    [first] = await runs_of(store, tmpl)
    assert first.status is Status.QUEUED
    if previous is Status.CLAIMED:
        picked = await store.apply(states.pick(first.id, worker="w", token="t", now=after(2)))
        assert picked is not None

    await tick_at(scheduler, 301)

    cancelled, second = await runs_of(store, tmpl)
    assert (cancelled.id, cancelled.status) == (first.id, Status.CANCELLED)
    assert second.status is Status.QUEUED
    records = await ledger(store, tmpl)
    assert summary(records) == [(BASE, "spawned", None), (after(300), "spawned", None)]
    assert [r.cancelled_run_id for r in records] == [None, first.id]
    assert records[1].run_id == second.id
    assert sample(deps.metrics, "scheduler_cron_cancelled_previous_total") == 1
    # A claimed run's executor then loses its start: it never runs.
    lost = await store.apply(states.start(first.id, token="t", now=after(302)))
    assert lost is None

    # The previous run finished on its own: nothing to cancel.
    await finish(store, second)
    await tick_at(scheduler, 601)
    records = await ledger(store, tmpl)
    assert records[-1].cancelled_run_id is None
    assert (await store.get(second.id)).status is Status.COMPLETED
    assert sample(deps.metrics, "scheduler_cron_cancelled_previous_total") == 1
    assert len(await runs_of(store, tmpl)) == 3


async def test_a_running_previous_run_is_asked_to_stop_and_its_executor_cancels_it(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    async def hang(ctx: JobContext) -> None:
        await trio.sleep_forever()

    deps = make_deps(registry=registry_of("hang", hang))  # heartbeat every 10 s
    scheduler = Scheduler(deps)
    tmpl = attrs.evolve(template("replace-running", EVERY_5, BASE, overlap=CANCEL), job_type="hang")
    await store.insert(tmpl)
    await tick_at(scheduler, 1)
    [first] = await runs_of(store, tmpl)
    executor = Executor(deps)
    asked: list[float] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(executor.heartbeat_loop)

        async def run() -> None:
            await executor.run(wake_up(first))
            nursery.cancel_scope.cancel()

        nursery.start_soon(run)
        await reached(store, first.id, Status.RUNNING, poll=0.01)  # the executor started it

        await tick_at(scheduler, 301)
        requested = await store.get(first.id)
        # Still running, now with a cancel request; the new run is spawned beside it.
        assert requested.status is Status.RUNNING
        assert requested.cancel_requested_at is not None
        asked.append(trio.current_time())
    stopped = trio.current_time()

    assert stopped - asked[0] <= deps.settings.heartbeat_interval + 1
    cancelled = await store.get(first.id)
    assert (cancelled.status, cancelled.last_error) == (Status.CANCELLED, "cancelled while running")
    records = await ledger(store, tmpl)
    assert [r.cancelled_run_id for r in records] == [None, first.id]
    assert [r.idempotency_key for r in await runs_of(store, tmpl)] == keys(tmpl, BASE, after(300))


async def test_fire_times_due_together_spawn_only_the_newest_and_record_the_others_skipped(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    tmpl = await store.insert(
        template("backlog", EVERY_5, BASE, overlap=CANCEL, catch_up=CatchUp.ALL)
    )
    await trio.sleep(900 + 30)  # 00:00 .. 00:15 due at once
    await Scheduler(deps).tick()

    assert summary(await ledger(store, tmpl)) == [
        *[(after(s), "skipped", "overlap") for s in (0, 300, 600)],
        (after(900), "spawned", None),
    ]
    assert [r.idempotency_key for r in await runs_of(store, tmpl)] == keys(tmpl, after(900))
    assert sample(deps.metrics, "scheduler_cron_skipped_total", {"reason": "overlap"}) == 3
    assert sample(deps.metrics, "scheduler_cron_cancelled_previous_total") == 0


async def test_two_schedulers_at_once_cancel_the_previous_run_once_and_spawn_one_run(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
) -> None:
    tmpl = await store.insert(template("split", EVERY_5, BASE, overlap=CANCEL))
    await tick_at(Scheduler(make_deps()), 1)
    [first] = await runs_of(store, tmpl)
    await trio.sleep_until(301)
    # Two leaders for a moment: two schedulers, each with its own deps, on one store.
    barrier = Barrier(2)
    both = [
        make_deps(store=SplitBrainStore(store, barrier), clock=TrioClock(base=after(301)))
        for _ in range(2)
    ]
    async with trio.open_nursery() as nursery:
        for deps in both:
            nursery.start_soon(Scheduler(deps).tick)

    records = await ledger(store, tmpl)
    assert [(r.fire_at, r.cancelled_run_id) for r in records] == [
        (BASE, None),
        (after(300), first.id),
    ]
    runs = await runs_of(store, tmpl)
    assert [r.id for r in runs] == [first.id, records[1].run_id]
    assert [r.status for r in runs] == [Status.CANCELLED, Status.QUEUED]
    cancels = [sample(d.metrics, "scheduler_cron_cancelled_previous_total") for d in both]
    assert sum(cancels) == 1


async def test_a_ledger_table_from_before_cancel_previous_gains_its_column_on_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE occurrences (
            template_id TEXT NOT NULL, fire_at INTEGER NOT NULL, tenant_id TEXT NOT NULL,
            status TEXT NOT NULL, reason TEXT, run_id TEXT, recorded_at INTEGER NOT NULL,
            PRIMARY KEY (template_id, fire_at)
        ) WITHOUT ROWID;
        INSERT INTO occurrences VALUES ('t', 0, 'tenant-a', 'skipped', 'missed', NULL, 5);
        """
    )
    conn.close()
    for _ in range(2):  # starting again on the migrated file is a no-op
        async with started(SQLiteJobStore(path)) as store:
            [old] = await store.occurrences(OccurrenceQuery("t"), limit=5)
        assert (old.reason, old.cancelled_run_id) == (cron.SkipReason.MISSED, None)
        assert old.recorded_at - old.fire_at == timedelta(milliseconds=5)
