"""Files made before retention gain at start what pruning and the counters need; the space
pruned jobs leave goes back to the file system; a prune holds the writer one slice at a
time, and slows down while other writes come in (so does the archive path's delete)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trio

from jobscheduler.domain.model import Status
from jobscheduler.store.sqlite import SQLiteJobStore, upkeep

from .conftest import make_job, started_sqlite


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
    store = await started_sqlite(path)
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

    store = await started_sqlite(path)
    try:
        assert (await store.get(done.id)).finished_at == updated
        assert (await store.get(waiting.id)).finished_at is None
    finally:
        await store.close()


def _pragma(path: Path, name: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"PRAGMA {name}").fetchone()[0])
    finally:
        conn.close()


def _auto_vacuum(path: Path) -> int:
    return _pragma(path, "auto_vacuum")


def _page_count(path: Path) -> int:
    return _pragma(path, "page_count")


async def test_a_new_file_and_an_older_one_vacuum_incrementally(tmp_path: Path) -> None:
    fresh = tmp_path / "new.db"
    store = await started_sqlite(fresh)
    await store.close()
    assert _auto_vacuum(fresh) == 2  # INCREMENTAL
    old = tmp_path / "old.db"
    conn = sqlite3.connect(old)
    conn.execute("CREATE TABLE keep (x)")  # a file made before: no auto_vacuum
    conn.commit()
    conn.close()
    assert _auto_vacuum(old) == 0
    store = await started_sqlite(old)
    await store.close()
    assert _auto_vacuum(old) == 2


async def test_the_pages_pruned_jobs_leave_are_given_back(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    store = await started_sqlite(path)
    try:
        jobs = [make_job(status=Status.COMPLETED, payload={"pad": "x" * 2000}) for _ in range(500)]
        await store.insert_many(jobs)
        key = ("tenant-a", Status.COMPLETED, "noop")
        future = datetime(2100, 1, 1, tzinfo=UTC)
        pruned = 0
        while step := await store.prune_expired(key, future, 1000):
            pruned += step
        assert pruned == 500
        full = _page_count(path)
        given = 0
        while step := await store.reclaim_space(64):
            given += step
        assert given > 200  # 500 rows of 2 KB: hundreds of 4 KB pages
        assert await store.reclaim_space(64) == 0
    finally:
        await store.close()
    assert _page_count(path) <= full - given  # the file itself is that much shorter


#: The key of :func:`expired_store`'s jobs, and an instant by which they have all expired.
KEY = ("tenant-a", Status.COMPLETED, "noop")
FUTURE = datetime(2100, 1, 1, tzinfo=UTC)


@contextlib.asynccontextmanager
async def expired_store(
    path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    slice_seconds: float | None = None,
    busy_pause: float | None = None,
) -> AsyncIterator[SQLiteJobStore]:
    """A store holding 25 completed jobs of :data:`KEY`, which its prune deletes in slices of
    10 rows; ``slice_seconds`` and ``busy_pause``, when given, replace the upkeep's
    ``PRUNE_SLICE_SECONDS`` and ``PRUNE_BUSY_PAUSE``."""
    monkeypatch.setattr(upkeep, "PRUNE_SLICE_ROWS", 10)
    if slice_seconds is not None:
        monkeypatch.setattr(upkeep, "PRUNE_SLICE_SECONDS", slice_seconds)
    if busy_pause is not None:
        monkeypatch.setattr(upkeep, "PRUNE_BUSY_PAUSE", busy_pause)
    store = await started_sqlite(path)
    try:
        await store.insert_many([make_job(status=Status.COMPLETED) for _ in range(25)])
        yield store
    finally:
        await store.close()


def writes_queued(monkeypatch: pytest.MonkeyPatch, store: SQLiteJobStore, queued: bool) -> None:
    """Make the writer of ``store`` report another write queued (or none) from now on."""
    assert store._batches is not None
    monkeypatch.setattr(store._batches, "waiting", lambda: queued)


async def test_a_prune_leaves_the_writer_after_each_slice_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slice's time is up at once: each write deletes one slice of rows, oldest first, and
    # the call goes on with the next write until its limit or the last expired job.
    async with expired_store(tmp_path / "jobs.db", monkeypatch, slice_seconds=0.0) as store:
        writes: list[int] = []
        write = store._write

        async def counted(op: Any, **kwargs: Any) -> Any:
            result = await write(op, **kwargs)
            writes.append(result[0])
            return result

        monkeypatch.setattr(store, "_write", counted)
        assert await store.prune_expired(KEY, FUTURE, 15) == 15
        assert writes == [10, 5]
        assert await store.prune_expired(KEY, FUTURE, 1000) == 10
        assert writes == [10, 5, 10, 0]  # a slice short of its rows ends the call
        assert await store.prune_expired(KEY, FUTURE, 1000) == 0
        assert await store.job_counters() == {}


async def test_a_prune_pauses_after_a_slice_that_gave_way_to_other_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under load a prune slows down: after each slice that gave way, a pause.
    async with expired_store(
        tmp_path / "jobs.db", monkeypatch, slice_seconds=60.0, busy_pause=0.2
    ) as store:
        writes_queued(monkeypatch, store, True)
        started = trio.current_time()
        assert await store.prune_expired(KEY, FUTURE, 20) == 20  # two slices, each gave way
        assert trio.current_time() - started >= 0.4
        writes_queued(monkeypatch, store, False)  # quiet again
        monkeypatch.setattr(upkeep, "PRUNE_BUSY_PAUSE", 60.0)
        with trio.fail_after(30):  # no pause
            assert await store.prune_expired(KEY, FUTURE, 1000) == 5


async def test_the_archive_paths_delete_pauses_after_a_slice_that_gave_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with expired_store(tmp_path / "jobs.db", monkeypatch, busy_pause=0.2) as store:
        jobs = await store.expired_jobs(KEY, FUTURE, 1000)
        writes_queued(monkeypatch, store, True)
        started = trio.current_time()
        assert await store.delete_jobs(jobs[:20]) == 20  # two slices, each giving way
        assert trio.current_time() - started >= 0.4
        writes_queued(monkeypatch, store, False)  # quiet again
        monkeypatch.setattr(upkeep, "PRUNE_BUSY_PAUSE", 60.0)
        with trio.fail_after(30):  # no pause
            assert await store.delete_jobs(jobs[20:]) == 5
        assert await store.job_counters() == {}
