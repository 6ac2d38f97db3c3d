"""The SQLite store's connections: one writer with a group commit, a pool of readers.

Writes go through the group commit of :mod:`~jobscheduler.store.sqlite.writer`: one thread
owns the single writer connection and runs the queued operations batch by batch, one
transaction each. Reads use a small pool of separate connections in trio's worker threads
(WAL lets them run beside the writer). A third connection checkpoints the WAL and syncs
the database file (:mod:`~jobscheduler.store.sqlite.checkpoints`), so the writer's commits
seldom do either.

``":memory:"`` is one private in-memory database: everything, reads included, runs on the
writer's connection, in its batches (separate connections would each open their own empty
database).

Every ``sqlite3`` error (a full disk, a read-only file, a lock held too long) becomes a
:class:`~jobscheduler.errors.StoreError` at this edge, so callers answer 503 or retry
instead of crashing; a string no SQLite text can hold (a lone surrogate) is a
:class:`~jobscheduler.errors.ValidationError`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import trio

from jobscheduler.errors import StoreError

from .checkpoints import WAL_SIZE_LIMIT, Checkpointer
from .writer import BatchWriter

#: Values bound in one ``IN (...)`` list, well under SQLite's limit of a statement's parameters.
IN_LIST_SIZE = 500

T = TypeVar("T")
V = TypeVar("V")

MEMORY = ":memory:"


def placeholders(count: int) -> str:
    """``?, ?, ...``: the parameter marks of ``count`` values (a VALUES or an IN list)."""
    return ", ".join("?" * count)


def in_lists(values: Sequence[V]) -> Iterator[tuple[Sequence[V], str]]:
    """``values`` in slices of :data:`IN_LIST_SIZE`, each with its ``(?, ...)`` list."""
    for start in range(0, len(values), IN_LIST_SIZE):
        chunk = values[start : start + IN_LIST_SIZE]
        yield chunk, f"({placeholders(len(chunk))})"


def first_row(
    conn: sqlite3.Connection,
    sql: str,
    params: Sequence[Any],
    decode: Callable[[tuple[Any, ...]], T],
) -> T | None:
    """The first row ``sql`` returns (a SELECT, or a write's RETURNING) through ``decode``, or
    None if it returns no row."""
    row = conn.execute(sql, params).fetchone()
    return None if row is None else decode(row)


def key_holder(conn: sqlite3.Connection, table: str, tenant_id: str, key: str) -> str | None:
    """The id of the row of ``table`` holding the idempotency ``key`` in ``tenant_id`` (its
    (tenant, key) unique index), or None if no row holds it."""
    row = conn.execute(
        f"SELECT id FROM {table} WHERE tenant_id = ? AND idempotency_key = ?", (tenant_id, key)
    ).fetchone()
    return None if row is None else str(row[0])


class SQLiteConnection:
    """The plumbing of :class:`~jobscheduler.store.sqlite.store.SQLiteJobStore`: ``start`` opens
    the writer, has the subclass prepare the schema (``_prepare``) and starts its thread;
    ``_write`` runs an operation in the writer's next batch, ``_read`` on a reader
    connection in a trio thread."""

    def __init__(self, path: str | os.PathLike[str], *, readers: int = 4) -> None:
        self._path = str(path)
        self._memory = self._path == MEMORY
        self._readers = readers
        self._writer: sqlite3.Connection | None = None
        self._read_pool: list[sqlite3.Connection] = []
        self._all_readers: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._read_limiter = trio.CapacityLimiter(readers)
        self._batches: BatchWriter | None = None
        self._checkpoints: Checkpointer | None = None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, isolation_level=None, check_same_thread=False, timeout=10.0
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        # Statement journals and savepoints in memory, not in a temporary file: a batch of
        # several writes opened, wrote and unlinked one per commit (a third of its cost).
        conn.execute("PRAGMA temp_store=MEMORY")
        # The WAL is checkpointed every WAL_AUTOCHECKPOINT pages (SQLite's default, 4 MB);
        # past a burst it is cut back to this size rather than kept at its largest.
        conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        return conn

    async def start(self) -> None:
        if self._writer is not None:
            return

        def open_writer() -> tuple[sqlite3.Connection, sqlite3.Connection | None]:
            if not self._memory:
                Path(self._path).parent.mkdir(parents=True, exist_ok=True)
            conn = self._connect()
            self._prepare(conn)
            if self._memory:
                return conn, None
            # Checkpoints are the checkpointer's (checkpoints.py); the commits' only past
            # WAL_SIZE_LIMIT, to start the WAL over.
            pages = WAL_SIZE_LIMIT // conn.execute("PRAGMA page_size").fetchone()[0]
            conn.execute(f"PRAGMA wal_autocheckpoint={pages}")
            return conn, self._connect()

        try:
            writer, checkpoints = await trio.to_thread.run_sync(open_writer)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store at {self._path}: {exc}") from exc
        self._writer = writer
        if checkpoints is not None:
            self._checkpoints = Checkpointer(checkpoints, Path(self._path))
            trio.lowlevel.spawn_system_task(self._checkpoints.serve, name="sqlite-checkpoints")
        on_changes = None if self._checkpoints is None else self._checkpoints.changed
        self._batches = BatchWriter(writer, on_changes)
        # The writer thread's owner: a system task, so the trio run's end cancels it.
        trio.lowlevel.spawn_system_task(self._batches.serve, name="sqlite-writer")

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """Create or migrate the schema on the new writer connection (a worker thread)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Run the writes already queued, then close the connections."""
        batches, self._batches = self._batches, None  # later writes: "store is closed"
        if batches is not None:
            await batches.stop()
        checkpoints, self._checkpoints = self._checkpoints, None
        if checkpoints is not None:
            await checkpoints.stop()
        writer, self._writer = self._writer, None
        with self._pool_lock:
            readers, self._all_readers, self._read_pool = self._all_readers, [], []
        for conn in [*readers, *([writer] if writer else [])]:
            conn.close()
        if checkpoints is not None:
            checkpoints.release()
        await trio.lowlevel.checkpoint()

    async def _write(
        self,
        op: Callable[[sqlite3.Connection], T],
        *,
        abandon_on_cancel: bool = False,
        background: bool = False,
    ) -> T:
        if self._batches is None:
            raise StoreError("store is closed")
        return await self._batches.write(
            op, abandon_on_cancel=abandon_on_cancel, background=background
        )

    async def _insert_new(self, sql: str, params: Sequence[Any], what: str) -> None:
        """Run the INSERT ``sql``; a taken id is a StoreError ("<what> id clash")."""

        def op(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(sql, params)
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"{what} id clash: {exc}") from None

        await self._write(op)

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
                # One in-memory database, one connection: reads run in the writer's batches.
                return await self._write(op)
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
