"""SQLite store faults: every driver error leaves the adapter as StoreError (a full
disk answers 503 and the roles retry, instead of crashing ``dev``), and ``:memory:`` is one
database shared by the writer and every reader."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status, new_job_id
from jobscheduler.domain.states import Change
from jobscheduler.errors import StoreError, ValidationError
from jobscheduler.store.sqlite import SQLiteJobStore
from tests.support.stores import started

from .conftest import started_sqlite

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def job(key: str, *, payload: dict[str, object] | None = None, tenant: str = "t") -> Job:
    return Job(
        id=new_job_id(),
        idempotency_key=key,
        tenant_id=tenant,
        job_type="noop",
        payload=payload or {},
        scheduled_at=NOW,
        created_at=NOW,
        updated_at=NOW,
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteJobStore]:
    async with started(SQLiteJobStore(tmp_path / "jobs.db")) as sqlite_store:
        yield sqlite_store


def cap_pages(store: SQLiteJobStore, pages: int) -> None:
    """Make the writer's database "full": no more pages than it has now (plus ``pages``)."""
    writer = store._writer
    assert writer is not None
    current = writer.execute("PRAGMA page_count").fetchone()[0]
    writer.execute(f"PRAGMA max_page_count = {current + pages}")


async def test_full_database_fails_inserts_and_transitions_as_store_error_then_recovers(
    store: SQLiteJobStore,
) -> None:
    # Bug: a raw sqlite3.OperationalError ("database or disk is full") escaped the
    # write path and crashed the role that hit it.
    kept = await store.insert(job("before"))
    cap_pages(store, 0)
    big = {"blob": "x" * 200_000}
    with pytest.raises(StoreError, match="full") as caught:
        await store.insert(job("too-big", payload=big))
    assert not isinstance(caught.value, sqlite3.Error)
    # Reads still work, and nothing of the failed insert was written.
    assert [j.idempotency_key for j in await store.list_jobs("t", None, 10)] == ["before"]
    # The disk gets space again: writes succeed without a restart.
    cap_pages(store, 100_000)
    await store.insert(job("after", payload=big))
    claimed = await store.claim_due(NOW, 1)
    assert claimed[0].id == kept.id
    assert claimed[0].status is Status.QUEUED


async def test_database_refusing_writes_fails_them_as_store_error(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    writable = await started_sqlite(path)
    await writable.insert(job("kept"))
    await writable.close()
    # Bug: an error raised inside an operation (here "attempt to write a readonly
    # database", as a read-only file or mount gives) escaped as a raw sqlite3 error.
    store = await started_sqlite(path)
    try:
        assert store._writer is not None
        store._writer.execute("PRAGMA query_only = ON")
        with pytest.raises(StoreError, match="readonly") as caught:
            await store.insert(job("refused"))
        assert not isinstance(caught.value, sqlite3.Error)
        change = states.requeue(job("x"), now=NOW)
        with pytest.raises(StoreError):
            await store.apply(change)
        assert [j.idempotency_key for j in await store.list_jobs("t", None, 10)] == ["kept"]
    finally:
        await store.close()


async def test_string_sqlite_cannot_encode_is_a_validation_error_not_a_driver_error(
    store: SQLiteJobStore,
) -> None:
    with pytest.raises(ValidationError, match="not valid Unicode"):
        await store.insert(job("k", tenant="\ud800x"))
    await store.insert(job("k"))  # the failed insert left nothing behind


async def test_memory_store_is_one_database_shared_by_the_writer_and_every_reader() -> None:
    # Bug: SQLiteJobStore(":memory:") opened a new, empty database for each reader
    # connection, so a job just inserted could not be read back.
    store = await started_sqlite(":memory:")
    try:
        inserted = [await store.insert(job(f"k{n}")) for n in range(3)]
        assert await store.get(inserted[0].id) == inserted[0]
        assert len(await store.list_jobs("t", None, 10)) == 3
        assert (await store.count_by_status())[Status.PENDING] == 3
        assert await store.next_due_at() == NOW
        await store.ping()
    finally:
        await store.close()
    other = await started_sqlite(":memory:")
    try:
        assert await other.list_jobs("t", None, 10) == []  # private to its store
    finally:
        await other.close()


async def test_ping_of_a_started_store_answers_and_of_a_closed_one_is_store_error(
    store: SQLiteJobStore,
) -> None:
    await store.ping()
    await store.close()
    with pytest.raises(StoreError):
        await store.ping()


async def test_driver_error_inside_a_transition_is_store_error_and_fails_only_that_write(
    store: SQLiteJobStore,
) -> None:
    # Bug: an error raised by an operation inside the group-commit batch (here a
    # trigger's abort, standing in for any failing statement) escaped as a raw sqlite3 error,
    # which no role catches.
    kept = await store.insert(job("kept"))
    assert store._writer is not None
    store._writer.execute(
        "CREATE TEMP TRIGGER refuse BEFORE UPDATE ON jobs BEGIN "
        "SELECT RAISE(ABORT, 'simulated driver failure'); END"
    )
    touch = Change(
        transition="touch", job_id=kept.id, expect={"status": Status.PENDING}, set={"priority": 5}
    )
    with pytest.raises(StoreError, match="simulated driver failure") as caught:
        await store.apply(touch)
    assert not isinstance(caught.value, sqlite3.Error)
    with pytest.raises(StoreError, match="simulated driver failure"):
        await store.claim_due(NOW, 10)
    await store.insert(job("still-writable"))
    store._writer.execute("DROP TRIGGER refuse")
    assert [j.id for j in await store.claim_due(NOW, 1)] == [kept.id]
