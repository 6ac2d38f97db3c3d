"""The background roles' SQLite statements read through the index meant for them.

SQLite plans without statistics, by the shape of each index. An index added for a new read
(the dashboard's ``jobs_status_created``, on ``(status, created_at)``) looked better to the
planner than the partial indexes the hot queries were written for, and every scheduler pass
then read every pending job: 5-6 ms per query at 14,000 jobs due tomorrow, growing with
them. This test runs each background role's store calls with a trace on every connection
and checks the plan of every statement they send; another checks that the throughput
figures count the jobs that ended in their windows from the finished-jobs index alone.
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


def _traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the SQLite stores opened from now on send, in order."""
    statements: list[str] = []
    connect = SQLiteJobStore._connect

    def traced(self: SQLiteJobStore) -> sqlite3.Connection:
        conn = connect(self)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(SQLiteJobStore, "_connect", traced)
    return statements


def _plans(path: Path, statements: list[str]) -> list[tuple[str, str]]:
    """Each statement and SQLite's plan of it on the file at ``path``."""
    check = sqlite3.connect(path)
    try:
        return [
            (sql, " | ".join(row[3] for row in check.execute(f"EXPLAIN QUERY PLAN {sql}")))
            for sql in statements
        ]
    finally:
        check.close()


async def test_the_background_roles_statements_walk_their_own_indexes(
    tmp_path: Path, make_deps: DepsFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements = _traced(monkeypatch)
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
    for sql, plan in _plans(tmp_path / "traced.db", reads):
        assert "TEMP B-TREE FOR ORDER BY" not in plan, (sql, plan)
        assert "SCAN jobs" not in plan or "USING" in plan, (sql, plan)
        if _COUNT_ALL not in sql:
            assert "jobs_status_created" not in plan, (sql, plan)


async def test_the_throughput_figures_read_the_counters_of_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``GET /stats``'s windows and the Overview's series read the counters of the steps
    they cover (by the primary key, or the steps' index across tenants), never the jobs
    (300,000 ends in 15 minutes took the stats 115-125 ms when they were counted from an
    index of the jobs)."""
    statements = _traced(monkeypatch)
    store = await started_sqlite(tmp_path / "traced.db")
    try:
        await store.insert(make_job(tenant="t", status=Status.COMPLETED))
        await store.insert(make_job(tenant="t", status=Status.DLQ))
        for tenant in (None, "t"):
            await store.stats(tenant, BASE)
            await store.overview_stats(tenant, BASE)
    finally:
        await store.close()

    counted = [sql for sql in dict.fromkeys(statements) if "FROM job_ends WHERE" in sql]
    assert len(counted) == 4, counted  # the stats and the Overview, of all and of a tenant
    for sql, plan in _plans(tmp_path / "traced.db", counted):
        assert "SEARCH job_ends USING" in plan, (sql, plan)
        assert "step>?" in plan, (sql, plan)


async def _read_steps(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    held: Exclusions,
    backlog: int,
    job_type: str,
    key: str | None = None,
) -> tuple[int, list[str]]:
    """SQLite's virtual-machine steps (which do not depend on the machine's speed) of one
    fair read over a group of ``backlog`` due jobs of ``job_type`` and ``key`` and, after
    them, one ``report`` job; and the types it read."""
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
    store = await started_sqlite(tmp_path / f"backlog-{backlog}-{held.walk}.db")
    try:
        jobs = [
            make_job(job_type=job_type, concurrency_key=key, scheduled_at=after(-100))
            for _ in range(backlog)
        ]
        await store.insert_many([*jobs, make_job(job_type="report", scheduled_at=after(-1))])
        steps[0] = 0
        found = await store.fair_candidates(after(0), 50, held)
    finally:
        await store.close()
    return steps[0], [job.job_type for job in found]


async def test_a_fair_read_seeks_past_a_held_types_backlog_instead_of_walking_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A type held back (its slots full, its rate spent) can be all of a group's backlog;
    the claims while it is held read the group's other types without stepping through it."""
    held = Exclusions(types=frozenset({("tenant-a", "mail")}))
    small, found = await _read_steps(tmp_path, monkeypatch, held, 10, "mail")
    assert found == ["report"]
    large, found = await _read_steps(tmp_path, monkeypatch, held, 2000, "mail")
    assert found == ["report"]
    assert large < 2 * small + 10, (small, large)


async def test_a_fair_read_steps_over_a_held_keys_backlog_only_as_far_as_its_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full key has no index to seek past: its due jobs are stepped over, at most ``walk``
    of them (the claims between two full walks); a full walk reaches the jobs behind."""
    keys = frozenset({("tenant-a", "report", "hot")})
    bounded = Exclusions(keys=keys, walk=20)
    small, found = await _read_steps(tmp_path, monkeypatch, bounded, 10, "report", "hot")
    assert found == ["report"]  # within the walk: the job behind the key is read
    large, found = await _read_steps(tmp_path, monkeypatch, bounded, 2000, "report", "hot")
    assert found == []  # beyond it: left to a full walk
    assert large < 3 * small + 10, (small, large)
    full, found = await _read_steps(
        tmp_path, monkeypatch, Exclusions(keys=keys), 2000, "report", "hot"
    )
    assert found == ["report"]
    assert full > 10 * large, (large, full)
