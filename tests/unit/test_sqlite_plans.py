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
