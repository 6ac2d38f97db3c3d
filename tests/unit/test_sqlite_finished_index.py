"""A SQLite file whose finished-jobs indexes were made with other columns (before they held
the status, which lets the throughput figures read the index alone) gets today's at start."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from jobscheduler.domain.model import Status

from .conftest import BASE, make_job, started_sqlite

_INDEXES = "SELECT name, sql FROM sqlite_master WHERE name IN (?, ?) ORDER BY name"
_FINISHED = ("jobs_finished", "jobs_tenant_finished")


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
