"""SQLite-specific behaviour of the group commit (the shared contract is in tests/contract)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from jobscheduler import states
from jobscheduler.model import Job, new_job_id
from jobscheduler.store.sqlite import SQLiteJobStore

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def job(key: str) -> Job:
    return Job(
        id=new_job_id(),
        idempotency_key=key,
        tenant_id="t",
        job_type="noop",
        scheduled_at=NOW,
        created_at=NOW,
        updated_at=NOW,
    )


async def test_bug_a_writer_cancelled_after_taking_a_batch_orphaned_the_other_writes(
    tmp_path: Path,
) -> None:
    # Regression: the writer that takes a batch also carries other callers' writes. It was
    # cancelled (a client disconnect cancels its request) before its thread call started,
    # the batch never ran, and the other callers got None back — the scheduler crashed on a
    # claim that returned None. The batch must run whatever happens to the caller holding it.
    store = SQLiteJobStore(tmp_path / "jobs.db")
    await store.start()
    first, second = job("first"), job("second")
    results: dict[str, Job] = {}
    leader = trio.CancelScope()

    async def write_first() -> None:
        with leader:
            results["first"] = await store.insert(first)

    async def write_second() -> None:
        results["second"] = await store.insert(second)

    await store._write_lock.acquire()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(write_second)
        await trio.testing.wait_all_tasks_blocked()
        store._write_lock.release()  # hands the lock to write_first, with both writes queued
        leader.cancel()  # ...which is cancelled before it runs the batch
    assert results["second"] == second
    assert await store.get(second.id) == second
    await store.close()


async def test_a_write_cancelled_while_queued_is_withdrawn(tmp_path: Path) -> None:
    store = SQLiteJobStore(tmp_path / "jobs.db")
    await store.start()
    waiting = trio.CancelScope()

    async def write_queued() -> None:
        with waiting:
            await store.insert(job("queued"))

    await store._write_lock.acquire()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write_queued)
        await trio.testing.wait_all_tasks_blocked()
        waiting.cancel()
    store._write_lock.release()
    await store.insert(job("later"))  # runs a batch: the withdrawn write must not be in it
    assert [j.idempotency_key for j in await store.list_jobs("t", None, 10)] == ["later"]
    await store.close()


#: The jobs table as the first release created it (before results and cron template ids).
_FIRST_RELEASE_SCHEMA = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY, idempotency_key TEXT NOT NULL UNIQUE, tenant_id TEXT NOT NULL,
    job_type TEXT NOT NULL, payload TEXT NOT NULL, priority INTEGER NOT NULL,
    status TEXT NOT NULL, scheduled_at INTEGER NOT NULL, cron TEXT, attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL, last_error TEXT, claimed_by TEXT, claimed_at INTEGER,
    claim_token TEXT, heartbeat_at INTEGER, queued_at INTEGER, created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
"""


async def test_a_file_from_the_first_release_gains_the_new_columns_and_keeps_its_jobs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    millis = int(NOW.timestamp() * 1000)
    with sqlite3.connect(path) as conn:
        conn.executescript(_FIRST_RELEASE_SCHEMA)
        conn.execute(
            "INSERT INTO jobs VALUES (?, 'old', 't', 'noop', '{}', 0, 'pending', ?, NULL, 0, 3,"
            " NULL, NULL, NULL, NULL, NULL, NULL, ?, ?)",
            ("a" * 24, millis, millis, millis),
        )
    store = SQLiteJobStore(path)
    await store.start()
    try:
        old = await store.get("a" * 24)
        assert (old.idempotency_key, old.result, old.template_id) == ("old", None, None)
        [queued] = await store.claim_due(NOW, 1)
        assert await store.apply(states.pick(queued.id, worker="w", token="t", now=NOW))
        running = await store.apply(states.start(queued.id, token="t", now=NOW))
        assert running is not None
        done = await store.apply(states.complete(running, token="t", now=NOW, result=[1]))
        assert done is not None
        assert done.result == [1]
        assert len(await store.attempts(old.id)) == 1
    finally:
        await store.close()
    again = SQLiteJobStore(path)  # a second start finds the columns already there
    await again.start()
    try:
        assert (await again.get("a" * 24)).result == [1]
    finally:
        await again.close()


async def test_writes_started_together_share_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Writers made runnable in the same scheduling round (an executor's outcomes and its
    # next pick) are all queued by the time the first one, holding the lock, takes the
    # batch (taking trio's lock yields once): one batch, one commit.
    store = SQLiteJobStore(tmp_path / "jobs.db")
    await store.start()
    batches: list[int] = []
    run_batch = store._run_batch

    def counting(batch: list[Any]) -> None:
        batches.append(len(batch))
        run_batch(batch)

    monkeypatch.setattr(store, "_run_batch", counting)
    async with trio.open_nursery() as nursery:
        for key in ("a", "b", "c"):
            nursery.start_soon(store.insert, job(key))
    assert batches == [3]
    assert len(await store.list_jobs("t", None, 10)) == 3
    await store.close()
