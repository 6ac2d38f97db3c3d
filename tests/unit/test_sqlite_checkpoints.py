"""The SQLite store checkpoints its WAL on a connection of its own, and in the writer's
commits only once in WAL_SIZE_LIMIT (a checkpoint there syncs the database file and held
every write behind it)."""

from __future__ import annotations

from pathlib import Path

import trio

from jobscheduler.store.sqlite.checkpoints import WAL_SIZE_LIMIT

from .conftest import make_job, started_sqlite


async def test_the_wal_is_checkpointed_beside_the_writer_not_in_its_commits(
    tmp_path: Path,
) -> None:
    store = await started_sqlite(tmp_path / "jobs.db")
    try:
        pragma = await store._write(
            lambda conn: conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
        )
        assert pragma * 4096 == WAL_SIZE_LIMIT  # the default page size
        checkpoints = store._checkpoints
        assert checkpoints is not None
        assert checkpoints.runs == 0
        for _ in range(3):
            await store.insert_many([make_job() for _ in range(1000)])
        with trio.fail_after(10):
            while checkpoints.runs == 0:  # noqa: ASYNC110 (a counter of another thread's work)
                await trio.sleep(0.01)
    finally:
        await store.close()
