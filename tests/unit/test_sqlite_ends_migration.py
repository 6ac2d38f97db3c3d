"""A SQLite file made before the counters of ended jobs gets them at start: the ends of the
last hours counted once from the jobs, and the indexes the figures walked before dropped."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jobscheduler.domain.model import Status

from .conftest import make_job, started_sqlite

_OLDER = """
DROP TRIGGER job_ends_insert; DROP TRIGGER job_ends_update; DROP TABLE job_ends;
CREATE INDEX jobs_finished ON jobs (updated_at, status) WHERE status IN ('completed', 'dlq');
CREATE INDEX jobs_tenant_finished ON jobs (tenant_id, updated_at, status)
    WHERE status IN ('completed', 'dlq');
"""


def _names(path: Path, kind: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        found = {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (kind,))
        }
    conn.close()
    return found


async def test_an_older_files_recent_ends_are_counted_once_at_start(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    now = datetime.now(UTC)
    store = await started_sqlite(path)
    await store.insert(make_job(status=Status.COMPLETED, created_at=now - timedelta(minutes=3)))
    await store.insert(make_job(status=Status.DLQ, created_at=now - timedelta(minutes=30)))
    await store.insert(make_job(status=Status.COMPLETED, created_at=now - timedelta(days=2)))
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.executescript(_OLDER)  # as a version before the counters left the file
    conn.close()

    store = await started_sqlite(path)
    try:
        overview = await store.overview_stats(None, now)
        assert (sum(overview.completed), sum(overview.failed)) == (1, 1)
        [one, five, fifteen] = (await store.stats("tenant-a", now)).windows
        assert (one.completed, five.completed, fifteen.completed) == (0, 1, 1)
    finally:
        await store.close()
    assert "job_ends" in _names(path, "table")
    assert not {"jobs_finished", "jobs_tenant_finished"} & _names(path, "index")

    # Counted once: a second start counts nothing again.
    store = await started_sqlite(path)
    try:
        assert sum((await store.overview_stats(None, now)).completed) == 1
    finally:
        await store.close()
