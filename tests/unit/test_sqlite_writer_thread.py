"""The SQLite store's writer thread has an owner: a task of the trio run that started the
store. Closing the store ends it; so does the end of the run, for a store never closed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import trio

from jobscheduler.store.sqlite import SQLiteJobStore
from jobscheduler.store.sqlite.writer import THREAD_NAME

from .conftest import make_job, started_sqlite


def serving(thread: threading.Thread) -> bool:
    """The thread still serves a store (a thread back in trio's cache has its old name)."""
    return thread.is_alive() and thread.name == THREAD_NAME


def ends_within(thread: threading.Thread, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while serving(thread):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


async def open_store(path: Path) -> tuple[SQLiteJobStore, threading.Thread]:
    """A started store and its writer thread."""
    store = await started_sqlite(path)
    await store.insert(make_job())  # a write: the thread has served a batch
    assert store._batches is not None
    thread = store._batches.thread
    assert thread is not None
    return store, thread


async def test_the_writer_thread_serves_while_the_store_is_open_and_ends_when_it_closes(
    tmp_path: Path,
) -> None:
    store, thread = await open_store(tmp_path / "jobs.db")
    assert serving(thread)
    await store.close()
    assert await trio.to_thread.run_sync(ends_within, thread, 5.0)


def test_a_store_left_open_loses_its_writer_thread_when_its_trio_run_ends(
    tmp_path: Path,
) -> None:
    async def leave_open() -> threading.Thread:
        _, thread = await open_store(tmp_path / "jobs.db")
        return thread

    thread = trio.run(leave_open)
    assert ends_within(thread, 5.0)
