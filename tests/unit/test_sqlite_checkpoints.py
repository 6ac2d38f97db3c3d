"""The SQLite store checkpoints its WAL on a connection of its own, and in the writer's
commits only once in WAL_SIZE_LIMIT (a checkpoint there syncs the database file and held
every write behind it); the checkpointer syncs the database file after each of its own, so
that sync finds little to flush."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import trio

from jobscheduler.store.sqlite import checkpoints as checkpoints_module
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


async def test_each_checkpoint_syncs_the_database_file_whose_descriptor_outlives_the_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "jobs.db"
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(checkpoints_module.os, "fsync", fsync)
    store = await started_sqlite(path)
    checkpoints, writer = store._checkpoints, store._writer
    assert checkpoints is not None
    assert writer is not None
    writer_open_at_release: list[bool] = []
    real_release = checkpoints.release

    def release() -> None:
        # Closing the descriptor drops the process's POSIX locks on the file, which
        # SQLite's connections rely on: it goes once they are all closed.
        try:
            writer.execute("SELECT 1")
        except sqlite3.ProgrammingError:
            writer_open_at_release.append(False)
        else:
            writer_open_at_release.append(True)
        real_release()

    monkeypatch.setattr(checkpoints, "release", release)
    try:
        for _ in range(3):
            await store.insert_many([make_job() for _ in range(1000)])
        with trio.fail_after(10):
            while checkpoints.runs == 0:  # noqa: ASYNC110 (a counter of another thread's work)
                await trio.sleep(0.01)
        assert synced
        assert set(synced) == {path.stat().st_ino}
    finally:
        await store.close()
    assert writer_open_at_release == [False]
