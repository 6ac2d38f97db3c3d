"""The throughput figures (``GET /stats``'s windows, the Overview's series) count the jobs
that ended in a window from the finished-jobs index alone, and a file whose index was made
with other columns gets today's at start.

Counting reads every end in the window: with the index holding only ``updated_at``, each
end's row was read too for its status (300,000 ends in the last 15 minutes: the stats 250 ms,
the Overview 430 ms, its minutes counted in Python). The index now holds the status, and the
Overview's minutes are counted by SQLite.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jobscheduler.domain.model import Status
from jobscheduler.store.sqlite import SQLiteJobStore

from .conftest import BASE, make_job, started_sqlite

_INDEXES = "SELECT name, sql FROM sqlite_master WHERE name IN (?, ?) ORDER BY name"
_FINISHED = ("jobs_finished", "jobs_tenant_finished")


async def test_the_throughput_figures_read_only_the_finished_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
        await store.insert(make_job(tenant="t", status=Status.COMPLETED))
        await store.insert(make_job(tenant="t", status=Status.DLQ))
        for tenant in (None, "t"):
            await store.stats(tenant, BASE)
            await store.overview_stats(tenant, BASE)
    finally:
        await store.close()

    counted = [sql for sql in dict.fromkeys(statements) if "_finished WHERE" in sql]
    assert len(counted) == 4, counted  # the stats and the Overview, of all and of a tenant
    check = sqlite3.connect(tmp_path / "traced.db")
    try:
        for sql in counted:
            plan = " | ".join(row[3] for row in check.execute(f"EXPLAIN QUERY PLAN {sql}"))
            assert any(f"COVERING INDEX {name} " in plan for name in _FINISHED), (sql, plan)
    finally:
        check.close()


async def test_a_finished_index_made_with_other_columns_is_made_again_at_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "older.db"
    store = await started_sqlite(path)
    await store.insert(make_job(status=Status.COMPLETED))
    await store.close()
    with sqlite3.connect(path) as conn:
        today = conn.execute(_INDEXES, _FINISHED).fetchall()
        # As an older version made them: without the status.
        conn.executescript(
            "DROP INDEX jobs_finished; DROP INDEX jobs_tenant_finished;"
            "CREATE INDEX jobs_finished ON jobs (updated_at)"
            " WHERE status IN ('completed', 'dlq');"
            "CREATE INDEX jobs_tenant_finished ON jobs (tenant_id, updated_at)"
            " WHERE status IN ('completed', 'dlq');"
        )
    conn.close()

    store = await started_sqlite(path)
    try:
        assert sum((await store.overview_stats(None, BASE)).completed) == 1
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute(_INDEXES, _FINISHED).fetchall() == today
    conn.close()
    assert "updated_at, status)" in today[0][1]
