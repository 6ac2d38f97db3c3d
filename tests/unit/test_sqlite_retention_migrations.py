"""Files made before retention: at start they gain what pruning and the counters need."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from jobscheduler.domain.model import Status
from jobscheduler.store.sqlite import SQLiteJobStore

from .conftest import make_job


def _drop_finished_at(path: Path) -> None:
    """Make ``path`` look like a file from before ``finished_at``: no such column."""
    conn = sqlite3.connect(path)
    try:
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql LIKE '%finished_at%'"
        ).fetchall():
            conn.execute(f"DROP INDEX {name}")
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        ).fetchall():
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("ALTER TABLE jobs DROP COLUMN finished_at")
        conn.commit()
    finally:
        conn.close()


async def test_an_old_files_finished_jobs_finished_when_last_updated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    updated = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    store = SQLiteJobStore(path)
    await store.start()
    done = make_job(status=Status.COMPLETED)
    waiting = make_job()
    await store.insert(done)
    await store.insert(waiting)
    await store.close()
    _drop_finished_at(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE jobs SET updated_at = ?", (int(updated.timestamp() * 1000),))
    conn.commit()
    conn.close()

    store = SQLiteJobStore(path)
    await store.start()
    try:
        assert (await store.get(done.id)).finished_at == updated
        assert (await store.get(waiting.id)).finished_at is None
    finally:
        await store.close()
