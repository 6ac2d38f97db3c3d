"""SQLite-specific behaviour of the group commit (the shared contract is in tests/contract)."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import Job, Replay, Status, new_job_id
from jobscheduler.errors import JobNotFound, StoreError
from jobscheduler.store.sqlite import SQLiteJobStore
from jobscheduler.store.sqlite import writer as sqlite_writer
from jobscheduler.store.sqlite.attempts import INSERT_ATTEMPT, attempt_params

from .conftest import started_sqlite

NOW = datetime(2026, 1, 1, tzinfo=UTC)
REPLAY = Replay(at=NOW, previous_status=Status.DLQ, run=1)


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


class Stall:
    """An operation that holds the writer thread (a stalled disk) until released."""

    def __init__(self) -> None:
        self.running = threading.Event()
        self.release = threading.Event()
        self.timed_out = False

    def __call__(self, conn: sqlite3.Connection) -> None:
        self.running.set()
        self.timed_out = not self.release.wait(10)

    async def hold(self, store: SQLiteJobStore, nursery: trio.Nursery) -> None:
        """Queue the stall and return once the writer thread is inside it."""
        nursery.start_soon(store._write, self)
        await trio.to_thread.run_sync(self.running.wait, 10)


async def test_bug_a_writer_cancelled_after_taking_a_batch_orphaned_the_other_writes(
    tmp_path: Path,
) -> None:
    # Regression: the caller that took a batch also carried other callers' writes. It was
    # cancelled (a client disconnect cancels its request) before the batch ran, the batch
    # never ran, and the other callers got None back — the scheduler crashed on a claim that
    # returned None. Now the writer thread runs batches: a cancelled caller withdraws only
    # its own write, whoever handed the queue over.
    store = await started_sqlite(tmp_path / "jobs.db")
    first, second = job("first"), job("second")
    results: dict[str, Job] = {}
    leader = trio.CancelScope()
    stall = Stall()

    async def write_first() -> None:
        with leader:
            results["first"] = await store.insert(first)

    async def write_second() -> None:
        results["second"] = await store.insert(second)

    async with trio.open_nursery() as nursery:
        await stall.hold(store, nursery)
        nursery.start_soon(write_first)
        nursery.start_soon(write_second)
        await trio.testing.wait_all_tasks_blocked()
        assert store._batches is not None
        assert len(store._batches._pending) == 2  # both queued behind the stall
        leader.cancel()
        await trio.testing.wait_all_tasks_blocked()
        stall.release.set()
    assert "first" not in results
    assert results["second"] == second
    assert await store.get(second.id) == second
    with pytest.raises(JobNotFound):
        await store.get(first.id)  # withdrawn before any batch took it
    await store.close()


async def test_a_caller_cancelled_after_its_write_was_taken_waits_for_its_outcome(
    tmp_path: Path,
) -> None:
    # Once the writer thread has taken a write, the caller waits for it as for a thread
    # call and gets its result; the cancellation comes at its next checkpoint. (Request
    # handlers bound the wait with BoundedCalls, which detaches the call instead.)
    store = await started_sqlite(tmp_path / "jobs.db")
    ahead, behind = Stall(), Stall()
    taken = job("taken")
    results: list[Job] = []
    caller = trio.CancelScope()

    async def write() -> None:
        with caller:
            results.append(await store.insert(taken))
            await trio.lowlevel.checkpoint()
            raise AssertionError("the cancellation comes at the next checkpoint")

    async with trio.open_nursery() as nursery:
        await ahead.hold(store, nursery)
        nursery.start_soon(write)
        nursery.start_soon(store._write, behind)
        await trio.testing.wait_all_tasks_blocked()  # both queued behind `ahead`...
        ahead.release.set()  # ...and handed over together when it ends
        await trio.to_thread.run_sync(behind.running.wait, 10)  # the insert ran, `behind` holds
        caller.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert results == []  # still waiting for its batch
        behind.release.set()
    assert caller.cancelled_caught
    assert results == [taken]
    assert await store.get(taken.id) == taken
    await store.close()


async def test_close_runs_the_queued_writes_and_later_writes_fail_as_store_errors(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.db"
    store = await started_sqlite(path)
    stall = Stall()
    queued = job("queued")
    async with trio.open_nursery() as nursery:
        await stall.hold(store, nursery)
        nursery.start_soon(store.insert, queued)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(store.close)
        await trio.testing.wait_all_tasks_blocked()
        stall.release.set()
    with pytest.raises(StoreError, match="closed"):
        await store.insert(job("late"))
    again = await started_sqlite(path)
    try:
        assert await again.get(queued.id) == queued
    finally:
        await again.close()


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
    store = await started_sqlite(path)
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
    again = await started_sqlite(path)  # a second start finds the columns already there
    try:
        assert (await again.get("a" * 24)).result == [1]
    finally:
        await again.close()


async def test_a_close_that_gives_up_on_a_stalled_writer_returns(tmp_path: Path) -> None:
    # A shutdown bounds its close (CLOSE_TIMEOUT): a writer stuck on a stalled disk must
    # not hold the process past it.
    store = await started_sqlite(tmp_path / "jobs.db")
    stall = Stall()
    async with trio.open_nursery() as nursery:
        await stall.hold(store, nursery)
        with trio.move_on_after(0.5) as bounded:
            await store.close()
        assert bounded.cancelled_caught
        stall.release.set()
    assert not stall.timed_out  # the close gave up while the stall still held the thread


async def test_an_attempts_table_from_before_runs_is_rebuilt_keeping_its_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    store = await started_sqlite(path)
    kept = await store.insert(job("kept"))
    await store.close()
    with sqlite3.connect(path) as conn:  # the attempts table as it was: no run in its key
        conn.executescript(
            "DROP TABLE attempts;"
            "CREATE TABLE attempts (job_id TEXT NOT NULL, number INTEGER NOT NULL,"
            " outcome TEXT NOT NULL, worker TEXT, started_at INTEGER,"
            " finished_at INTEGER NOT NULL, error_type TEXT, error_message TEXT,"
            " traceback TEXT, PRIMARY KEY (job_id, number, outcome)) WITHOUT ROWID;"
        )
        conn.execute(
            "INSERT INTO attempts VALUES (?, 1, 'failed', 'w', NULL, ?, NULL, 'old', NULL)",
            (kept.id, int(NOW.timestamp() * 1000)),
        )
    store = await started_sqlite(path)
    try:
        [old] = await store.attempts(kept.id)
        assert (old.run, old.number, old.error_message) == (0, 1, "old")
        # The same attempt number and outcome in the next run is a record of its own.
        running = attrs.evolve(kept, status=Status.RUNNING, attempts=1, replays=(REPLAY,))
        record = states.attempt_record(running, outcome=Outcome.FAILED, now=NOW)
        await store._write(lambda conn: conn.execute(INSERT_ATTEMPT, attempt_params(record)))
        assert [(a.run, a.error_message) for a in await store.attempts(kept.id)] == [
            (0, "old"),
            (1, None),
        ]
    finally:
        await store.close()
    again = await started_sqlite(path)  # a second start finds the table rebuilt already
    try:
        assert len(await again.attempts(kept.id)) == 2
    finally:
        await again.close()


async def test_writes_started_together_share_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Writers made runnable in the same scheduling round (an executor's outcomes and its
    # next pick) are all queued by the time the first one hands the queue to the writer
    # thread (each yields once first): one batch, one commit.
    store = await started_sqlite(tmp_path / "jobs.db")
    batches: list[int] = []
    run_batch = sqlite_writer.run_batch

    def counting(conn: sqlite3.Connection, batch: list[Any]) -> None:
        batches.append(len(batch))
        run_batch(conn, batch)

    monkeypatch.setattr(sqlite_writer, "run_batch", counting)
    async with trio.open_nursery() as nursery:
        for key in ("a", "b", "c"):
            nursery.start_soon(store.insert, job(key))
    assert batches == [3]
    assert len(await store.list_jobs("t", None, 10)) == 3
    await store.close()


class Recorder:
    """Records each batch the writer thread runs: ``upkeep`` for a background operation
    of these tests, ``write`` for any other."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.batches: list[list[str]] = []
        run_batch = sqlite_writer.run_batch

        def recording(conn: sqlite3.Connection, batch: list[Any]) -> None:
            self.batches.append([_label(slot.op) for slot in batch])
            run_batch(conn, batch)

        monkeypatch.setattr(sqlite_writer, "run_batch", recording)


def upkeep(conn: sqlite3.Connection) -> None:
    """A background operation (a prune's slice)."""


def _label(op: Any) -> str:
    return "upkeep" if op.__name__ == "upkeep" else "write"


async def test_a_background_write_runs_alone_once_the_writes_queued_with_it_have_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await started_sqlite(tmp_path / "jobs.db")
    recorder = Recorder(monkeypatch)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: store._write(upkeep, background=True))
        for key in ("a", "b"):
            nursery.start_soon(store.insert, job(key))
    assert recorder.batches == [["write", "write"], ["upkeep"]]
    await store.close()


async def test_a_background_operation_sees_a_write_queued_while_it_runs_and_that_write_goes_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The prune's slices stop early on this sign, so a create waits for one slice at most.
    store = await started_sqlite(tmp_path / "jobs.db")
    writer = store._batches
    assert writer is not None
    running, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def upkeep(conn: sqlite3.Connection) -> None:
        running.set()
        release.wait(10)
        seen.append(writer.waiting())

    recorder = Recorder(monkeypatch)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: store._write(upkeep, background=True))
        nursery.start_soon(lambda: store._write(upkeep, background=True))
        await trio.to_thread.run_sync(running.wait, 10)
        nursery.start_soon(store.insert, job("created"))
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert seen == [True, False]
    assert recorder.batches == [["upkeep"], ["write"], ["upkeep"]]
    await store.close()


@pytest.mark.parametrize(
    ("max_wait", "order"),
    [(60.0, [["write"], ["upkeep"]]), (0.0, [["upkeep"], ["write"]])],
    ids=["within-its-wait-it-yields", "past-its-wait-it-goes-first"],
)
async def test_a_background_write_goes_before_queued_writes_once_it_has_waited_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_wait: float, order: list[list[str]]
) -> None:
    # Under a load that always has a write queued, upkeep still gets its turn.
    monkeypatch.setattr(sqlite_writer, "BACKGROUND_MAX_WAIT", max_wait)
    store = await started_sqlite(tmp_path / "jobs.db")
    stall = Stall()
    async with trio.open_nursery() as nursery:
        await stall.hold(store, nursery)
        recorder = Recorder(monkeypatch)
        nursery.start_soon(lambda: store._write(upkeep, background=True))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(store.insert, job("created"))
        await trio.testing.wait_all_tasks_blocked()
        stall.release.set()
    assert recorder.batches == order
    await store.close()
