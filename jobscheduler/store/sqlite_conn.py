"""The SQLite store's connections: one writer with a group commit, a pool of readers.

Writes go through a group commit: concurrent callers queue their operations, the first to
take the write lock runs every queued operation in one transaction on the single writer
connection (each inside its own SAVEPOINT when there are several, so one failed insert
fails only itself), and the others find their result ready. This keeps per-job transitions
individually atomic while paying one thread hop and one commit per batch, which is what lets
one process move thousands of jobs a second. Reads use a small pool of separate connections
(WAL lets them run beside the writer).

``":memory:"`` is one private in-memory database: everything, reads included, runs on the
single writer connection, one call at a time (separate connections would each open their
own empty database).

Every ``sqlite3`` error (a full disk, a read-only file, a lock held too long) becomes a
:class:`~jobscheduler.errors.StoreError` at this edge, so callers answer 503 or retry
instead of crashing; a string no SQLite text can hold (a lone surrogate) is a
:class:`~jobscheduler.errors.ValidationError`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import trio

from ..errors import StoreError, ValidationError

T = TypeVar("T")

MEMORY = ":memory:"


class _Slot(Generic[T]):
    """One queued write: the operation and, once run, its result or error."""

    __slots__ = ("done", "error", "op", "result")

    def __init__(self, op: Callable[[sqlite3.Connection], T]) -> None:
        self.op = op
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None


def _edge_error(exc: Exception) -> Exception:
    """A failed operation's error as callers may see it: project errors pass, a driver
    error becomes StoreError, an unencodable string a ValidationError."""
    if isinstance(exc, sqlite3.Error):
        mapped: Exception = StoreError(f"SQLite write failed: {exc}")
    elif isinstance(exc, UnicodeEncodeError):
        mapped = ValidationError(f"a string is not valid Unicode: {exc.reason}")
    else:
        return exc
    mapped.__cause__ = exc
    return mapped


class SQLiteConnection:
    """The plumbing of :class:`~jobscheduler.store.sqlite.SQLiteJobStore`: ``start`` opens
    the writer and has the subclass prepare the schema (``_prepare``), ``_write`` and
    ``_read`` run operations on a connection in a trio thread."""

    def __init__(self, path: str | os.PathLike[str], *, readers: int = 4) -> None:
        self._path = str(path)
        self._memory = self._path == MEMORY
        self._readers = readers
        self._writer: sqlite3.Connection | None = None
        self._read_pool: list[sqlite3.Connection] = []
        self._all_readers: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._write_lock = trio.Lock()
        self._write_limiter = trio.CapacityLimiter(1)
        self._read_limiter = trio.CapacityLimiter(readers)
        self._pending: list[_Slot[Any]] = []

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, isolation_level=None, check_same_thread=False, timeout=10.0
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        return conn

    async def start(self) -> None:
        if self._writer is not None:
            return

        def open_writer() -> sqlite3.Connection:
            if not self._memory:
                Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            conn = self._connect()
            self._prepare(conn)
            return conn

        try:
            self._writer = await trio.to_thread.run_sync(open_writer)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store at {self._path}: {exc}") from exc

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Create or migrate the schema on the new writer connection (a worker thread)."""
        raise NotImplementedError

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        with self._pool_lock:
            readers, self._all_readers, self._read_pool = self._all_readers, [], []
        for conn in [*readers, *([writer] if writer else [])]:
            conn.close()
        await trio.lowlevel.checkpoint()

    def _run_batch(self, batch: list[_Slot[Any]]) -> None:
        """Run every slot's operation in one transaction; every slot ends ``done``.

        A failing operation fails alone (its SAVEPOINT is rolled back). If the transaction
        itself fails (BEGIN, a savepoint, COMMIT), nothing of the batch was written and
        every slot gets the error.
        """
        conn = self._writer
        try:
            if conn is None:
                raise StoreError("store is closed")
            conn.execute("BEGIN IMMEDIATE")
            # An operation alone in its transaction (a create arriving alone) needs no
            # savepoint: if it fails, the whole transaction is rolled back.
            lone = len(batch) == 1
            for slot in batch:
                if not lone:
                    conn.execute("SAVEPOINT op")
                try:
                    slot.result = slot.op(conn)
                except Exception as exc:
                    if not conn.in_transaction:
                        # SQLite rolled the whole transaction back itself (SQLITE_FULL, an
                        # I/O error): every write of the batch is lost, so all fail with it.
                        raise
                    slot.error = _edge_error(exc)
                    if lone:
                        conn.execute("ROLLBACK")
                        return
                    conn.execute("ROLLBACK TO op")
                if not lone:
                    conn.execute("RELEASE op")
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn is not None and conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            error = (
                exc if isinstance(exc, StoreError) else StoreError(f"SQLite write failed: {exc}")
            )
            if error is not exc:
                error.__cause__ = exc
            for slot in batch:
                slot.error, slot.result = error, None
            if not isinstance(exc, Exception):
                raise
        finally:
            for slot in batch:
                slot.done = True

    async def _write(self, op: Callable[[sqlite3.Connection], T]) -> T:
        slot: _Slot[T] = _Slot(op)
        self._pending.append(slot)
        try:
            # Taking trio's lock yields once, so the writes of the tasks made runnable
            # together with this one (an executor's outcomes and its next pick) are queued
            # by then and share this transaction.
            async with self._write_lock:
                if not slot.done:
                    batch, self._pending = self._pending, []
                    # The batch carries other callers' writes: it must run even if this
                    # caller is cancelled (the thread call is short and never abandoned).
                    with trio.CancelScope(shield=True):
                        await trio.to_thread.run_sync(
                            self._run_batch, batch, limiter=self._write_limiter
                        )
        except BaseException:
            # Cancelled while waiting for the lock: withdraw the operation unless a batch
            # already took it (then its outcome is unknown to this caller, like a lost reply).
            if slot in self._pending:
                self._pending.remove(slot)
            raise
        if slot.error is not None:
            raise slot.error
        return slot.result  # type: ignore[return-value]

    def _read_sync(self, op: Callable[[sqlite3.Connection], T]) -> T:
        with self._pool_lock:
            conn = self._read_pool.pop() if self._read_pool else None
        if conn is None:
            conn = self._connect()
            with self._pool_lock:
                self._all_readers.append(conn)
        try:
            return op(conn)
        finally:
            with self._pool_lock:
                if conn in self._all_readers:
                    self._read_pool.append(conn)

    async def _read(
        self, op: Callable[[sqlite3.Connection], T], *, abandon_on_cancel: bool = False
    ) -> T:
        writer = self._writer
        if writer is None:
            raise StoreError("store is not started")
        try:
            if self._memory:
                # One in-memory database, one connection: reads wait for the writer's batch.
                async with self._write_lock:
                    return await trio.to_thread.run_sync(op, writer, limiter=self._write_limiter)
            return await trio.to_thread.run_sync(
                self._read_sync,
                op,
                limiter=self._read_limiter,
                abandon_on_cancel=abandon_on_cancel,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite read failed: {exc}") from exc

    async def ping(self) -> None:
        """``SELECT 1`` on a reader connection; its thread is abandoned if cancelled."""
        await self._read(lambda conn: conn.execute("SELECT 1").fetchone(), abandon_on_cancel=True)
