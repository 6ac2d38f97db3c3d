"""SQLite-specific behaviour of the group commit (the shared contract is in tests/contract)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import trio
import trio.testing

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
