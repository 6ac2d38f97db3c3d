"""The background roles' SQLite statements read through the index meant for them.

SQLite plans without statistics, by the shape of each index. An index added for a new read
(the dashboard's ``jobs_status_created``, on ``(status, created_at)``) looked better to the
planner than the partial indexes the hot queries were written for, and every scheduler pass
then read every pending job: 5-6 ms per query at 14,000 jobs due tomorrow, growing with
them. This test runs each background role's store calls with a trace on every connection
and checks the plan of every statement they send.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jobscheduler.domain.model import Status
from jobscheduler.roles.reaper.recovery import recover_in_flight
from jobscheduler.roles.reaper.sweeps import Reaper, sample_gauges
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store.query import Exclusions
from jobscheduler.store.sqlite import SQLiteJobStore

from .conftest import BASE, DepsFactory, after, make_job, started_sqlite

#: The job gauges and the Overview count every job by status on purpose (the Overview's
#: from the covering jobs_status_created).
_COUNT_ALL = "COUNT(*) FROM jobs GROUP BY status"


async def test_the_background_roles_statements_walk_their_own_indexes(
    tmp_path: Path, make_deps: DepsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[str] = []
    connect = SQLiteJobStore._connect

    def traced(self: SQLiteJobStore) -> sqlite3.Connection:
        conn = connect(self)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(SQLiteJobStore, "_connect", traced)
    store = await started_sqlite(tmp_path / "traced.db")
    try:
        for i in range(5):
            await store.insert(make_job(scheduled_at=after(3600 + i)))
        await store.insert(make_job(status=Status.COMPLETED))
        await store.insert(make_job(cron="* * * * *", scheduled_at=after(60)))
        deps = make_deps(store=store)
        await Scheduler(deps).tick()
        await store.next_due_at()
        await store.pass_reads(deps.clock.now())
        await Reaper(deps).sweep()
        await recover_in_flight(deps)
        await sample_gauges(deps, set())
        await store.overview_stats(None, BASE)
    finally:
        await store.close()

    reads = [
        sql
        for sql in dict.fromkeys(statements)
        if sql.lstrip().startswith(("SELECT", "UPDATE", "DELETE")) and " jobs " in sql
    ]
    assert len(reads) >= 10, reads  # claims, templates, due time, sweeps, gauges, overview
    check = sqlite3.connect(tmp_path / "traced.db")
    try:
        for sql in reads:
            plan = " | ".join(row[3] for row in check.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert "TEMP B-TREE FOR ORDER BY" not in plan, (sql, plan)
            assert "SCAN jobs" not in plan or "USING" in plan, (sql, plan)
            if _COUNT_ALL not in sql:
                assert "jobs_status_created" not in plan, (sql, plan)
    finally:
        check.close()


async def test_a_fair_read_seeks_past_a_held_types_backlog_instead_of_walking_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A type held back (its slots full, its rate spent) can be all of a group's backlog;
    the claims while it is held read the group's other types without stepping through it.
    Counted in SQLite's virtual-machine steps, which do not depend on the machine's speed."""
    steps = [0]
    connect = SQLiteJobStore._connect

    def counted(self: SQLiteJobStore) -> sqlite3.Connection:
        conn = connect(self)

        def step() -> int:
            steps[0] += 1
            return 0

        conn.set_progress_handler(step, 10)
        return conn

    monkeypatch.setattr(SQLiteJobStore, "_connect", counted)
    held = Exclusions(types=frozenset({("tenant-a", "mail")}))
    cost: dict[int, int] = {}
    for backlog in (10, 2000):
        store = await started_sqlite(tmp_path / f"backlog-{backlog}.db")
        try:
            mail = [make_job(job_type="mail", scheduled_at=after(-100)) for _ in range(backlog)]
            await store.insert_many([*mail, make_job(job_type="report", scheduled_at=after(-1))])
            steps[0] = 0
            found = await store.fair_candidates(after(0), 50, held)
            cost[backlog] = steps[0]
        finally:
            await store.close()
        assert [j.job_type for j in found] == ["report"]
    assert cost[2000] < 2 * cost[10] + 10, cost
