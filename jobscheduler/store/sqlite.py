"""The embedded JobStore: one SQLite file in WAL mode, stdlib ``sqlite3`` in trio threads.

Writes go through a group commit: concurrent callers queue their operations, the first to
take the write lock runs every queued operation in one transaction on the single writer
connection (each inside its own SAVEPOINT, so one failed insert fails only itself), and the
others find their result ready. This keeps per-job transitions individually atomic while
paying one thread hop and one commit per batch, which is what lets one process move
thousands of jobs a second. Reads use a small pool of separate connections (WAL lets them
run beside the writer).

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
import functools
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar

import trio

from ..attempts import Attempt
from ..cron import CronPolicy, Occurrence, OccurrenceStatus
from ..errors import JobNotFound, StoreError, ValidationError
from ..model import Job, Replay, Status
from ..states import Change, claim_fields
from . import sqlite_ledger
from .base import InsertOutcome, JobStore, duplicate_of, first_of_each_key, spread_outcomes
from .query import STATS_WINDOWS, Cursor, JobQuery, JobStats, Window
from .sqlite_attempts import (
    ATTEMPT_COLUMNS,
    ATTEMPTS_SCHEMA,
    INSERT_ATTEMPT,
    attempt_from_row,
    attempt_params,
    millis,
)
from .sqlite_query import MANAGE_INDEXES, find_sql, stats_sql
from .sqlite_tenancy import TENANCY_SCHEMA, SQLiteTenancyMixin, migrate_tenant_keys

T = TypeVar("T")

MEMORY = ":memory:"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Job field -> column. Times are integer milliseconds since the epoch (UTC).
_COLUMNS: dict[str, str] = {
    "id": "id",
    "idempotency_key": "idempotency_key",
    "tenant_id": "tenant_id",
    "job_type": "job_type",
    "payload": "payload",
    "priority": "priority",
    "status": "status",
    "scheduled_at": "scheduled_at",
    "cron": "cron",
    "attempts": "attempts",
    "max_attempts": "max_attempts",
    "last_error": "last_error",
    "claimed_by": "claimed_by",
    "claimed_at": "claimed_at",
    "claim_token": "claim_token",
    "heartbeat_at": "heartbeat_at",
    "queued_at": "queued_at",
    "created_at": "created_at",
    "updated_at": "updated_at",
    "cron_policy": "cron_policy",
    "cron_buffered": "cron_buffered",
    "result": "result",
    "template_id": "template_id",
    "fire_at": "fire_at",
    "cancel_requested_at": "cancel_requested_at",
    "replays": "replays",
}
_TIME_FIELDS = frozenset(
    {
        "scheduled_at",
        "claimed_at",
        "heartbeat_at",
        "queued_at",
        "created_at",
        "updated_at",
        "fire_at",
        "cancel_requested_at",
        "cron_buffered",
    }
)
_SELECT = ", ".join(_COLUMNS.values())

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id              TEXT PRIMARY KEY,
    idempotency_key TEXT NOT NULL,
    tenant_id       TEXT NOT NULL,
    job_type        TEXT NOT NULL,
    payload         TEXT NOT NULL,
    priority        INTEGER NOT NULL,
    status          TEXT NOT NULL,
    scheduled_at    INTEGER NOT NULL,
    cron            TEXT,
    attempts        INTEGER NOT NULL,
    max_attempts    INTEGER NOT NULL,
    last_error      TEXT,
    claimed_by      TEXT,
    claimed_at      INTEGER,
    claim_token     TEXT,
    heartbeat_at    INTEGER,
    queued_at       INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    result          TEXT,
    template_id     TEXT,
    cron_policy     TEXT,
    fire_at         INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS jobs_tenant_key ON jobs (tenant_id, idempotency_key);
CREATE INDEX IF NOT EXISTS jobs_due ON jobs (scheduled_at) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS jobs_claim ON jobs (priority, scheduled_at, id)
    WHERE status = 'pending' AND cron IS NULL;
CREATE INDEX IF NOT EXISTS jobs_queued ON jobs (queued_at) WHERE status IN ('queued');
CREATE INDEX IF NOT EXISTS jobs_in_flight ON jobs (heartbeat_at)
    WHERE status IN ('claimed', 'running');
CREATE INDEX IF NOT EXISTS jobs_tenant ON jobs (tenant_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS jobs_tenant_status ON jobs (tenant_id, status, created_at DESC, id DESC);
"""


def _millis_of(value: datetime) -> int:
    # Values come from model.utc (whole milliseconds), so rounding is exact.
    return round(value.timestamp() * 1000)


def _json_of(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _replays_of(value: Any) -> str | None:
    return json.dumps([r.to_json() for r in value], separators=(",", ":")) if value else None


#: Job field -> how its (non-None) value is stored; fields not named are stored as they are.
#: A table, not a chain of tests: every transition encodes several fields on the hot path.
_ENCODERS: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(_TIME_FIELDS, _millis_of),
    "payload": _json_of,
    "result": _json_of,
    "status": lambda value: Status(value).value,
    "cron_policy": lambda value: json.dumps(value.to_storage(), separators=(",", ":")),
    "replays": _replays_of,
}


def _to_db(field: str, value: Any) -> Any:
    if value is None:
        return None
    encode = _ENCODERS.get(field)
    return value if encode is None else encode(value)


#: Columns added after the first release: (column, definition), added to older files at start
#: (and to new ones: ``cron_buffered``, ``cancel_requested_at`` and ``replays`` exist only
#: through this list).
_ADDED_COLUMNS = (
    ("cron_policy", "TEXT"),
    ("result", "TEXT"),
    ("template_id", "TEXT"),
    ("fire_at", "INTEGER"),
    ("cron_buffered", "INTEGER"),
    ("cancel_requested_at", "INTEGER"),
    ("replays", "TEXT"),
)


def _migrate(conn: sqlite3.Connection) -> None:
    """Add the columns a file created by an older version lacks (idempotent)."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    for column, definition in _ADDED_COLUMNS:
        if column not in present:
            conn.execute(f"ALTER TABLE jobs ADD COLUMN {column} {definition}")


_FIELDS = tuple(_COLUMNS)
_TIME_INDEXES = tuple(i for i, field in enumerate(_FIELDS) if field in _TIME_FIELDS)
_PAYLOAD_INDEX = _FIELDS.index("payload")
_STATUS_INDEX = _FIELDS.index("status")
_CRON_POLICY_INDEX = _FIELDS.index("cron_policy")
_RESULT_INDEX = _FIELDS.index("result")
_REPLAYS_INDEX = _FIELDS.index("replays")
_STATUSES = {status.value: status for status in Status}


def _from_row(row: Sequence[Any]) -> Job:
    # On the hot path (every transition returns its row): positional, no intermediate dict.
    values = list(row)
    for i in _TIME_INDEXES:
        millis = values[i]
        if millis is not None:
            # Exact: a float of whole milliseconds rounds back to the same microsecond.
            values[i] = datetime.fromtimestamp(millis / 1000, UTC)
    payload = values[_PAYLOAD_INDEX]
    values[_PAYLOAD_INDEX] = {} if payload == "{}" else json.loads(payload)
    values[_STATUS_INDEX] = _STATUSES[values[_STATUS_INDEX]]
    policy = values[_CRON_POLICY_INDEX]
    if policy is not None:
        values[_CRON_POLICY_INDEX] = CronPolicy.from_storage(json.loads(policy))
    result = values[_RESULT_INDEX]
    if result is not None:
        values[_RESULT_INDEX] = json.loads(result)
    replays = values[_REPLAYS_INDEX]
    values[_REPLAYS_INDEX] = (
        () if replays is None else tuple(Replay.from_json(r) for r in json.loads(replays))
    )
    return Job(**dict(zip(_FIELDS, values, strict=True)))


@functools.lru_cache(maxsize=256)
def _update_sql(
    set_fields: tuple[str, ...],
    expect_shape: tuple[tuple[str, int], ...],
    inc_fields: tuple[str, ...] = (),
    returning: bool = True,
) -> str:
    """The UPDATE for a Change of this shape (cached: transitions have a handful of shapes).

    ``expect_shape`` is (field, n): n > 0 is ``IN`` with n values, 0 is ``=``, -1 is NULL.
    ``inc_fields`` are added to (``column = column + ?``), after the ``set_fields``.
    ``returning`` False leaves out the read-back of the updated row (``RETURNING``).
    """
    assignments = ", ".join(
        [f"{_COLUMNS[f]} = ?" for f in set_fields]
        + [f"{_COLUMNS[f]} = {_COLUMNS[f]} + ?" for f in inc_fields]
    )
    conditions = ["id = ?"]
    for field, n in expect_shape:
        column = _COLUMNS[field]
        if n > 0:
            conditions.append(f"{column} IN ({', '.join('?' * n)})")
        elif n < 0:
            conditions.append(f"{column} IS NULL")
        else:
            conditions.append(f"{column} = ?")
    update = f"UPDATE jobs SET {assignments} WHERE {' AND '.join(conditions)}"
    return f"{update} RETURNING {_SELECT}" if returning else update


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


class SQLiteJobStore(SQLiteTenancyMixin, JobStore):
    """JobStore on one SQLite file (created with its directory if missing)."""

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

    # ------------------------------------------------------------------ lifecycle

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
            conn.executescript(_SCHEMA + ATTEMPTS_SCHEMA)
            _migrate(conn)
            if migrate_tenant_keys(conn):
                conn.executescript(_SCHEMA)  # the rebuilt table's indexes
            conn.executescript(TENANCY_SCHEMA)
            sqlite_ledger.migrate(conn)
            conn.executescript(MANAGE_INDEXES)
            return conn

        try:
            self._writer = await trio.to_thread.run_sync(open_writer)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store at {self._path}: {exc}") from exc

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        with self._pool_lock:
            readers, self._all_readers, self._read_pool = self._all_readers, [], []
        for conn in [*readers, *([writer] if writer else [])]:
            conn.close()
        await trio.lowlevel.checkpoint()

    # ------------------------------------------------------------------ plumbing

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
            for slot in batch:
                conn.execute("SAVEPOINT op")
                try:
                    slot.result = slot.op(conn)
                except Exception as exc:
                    if not conn.in_transaction:
                        # SQLite rolled the whole transaction back itself (SQLITE_FULL, an
                        # I/O error): every write of the batch is lost, so all fail with it.
                        raise
                    conn.execute("ROLLBACK TO op")
                    slot.error = _edge_error(exc)
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

    # ------------------------------------------------------------------ JobStore

    async def ping(self) -> None:
        """``SELECT 1`` on a reader connection; its thread is abandoned if cancelled."""
        await self._read(lambda conn: conn.execute("SELECT 1").fetchone(), abandon_on_cancel=True)

    async def insert(self, job: Job) -> Job:
        columns = list(_COLUMNS.values())
        params = [_to_db(field, getattr(job, field)) for field in _COLUMNS]
        sql = f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"

        def op(conn: sqlite3.Connection) -> Job:
            try:
                conn.execute(sql, params)
            except sqlite3.IntegrityError as exc:
                if "idempotency_key" in str(exc) or "template_id" in str(exc):
                    raise duplicate_of(job, self._holder(conn, job)) from None
                raise StoreError(f"insert failed: {exc}") from exc
            return job

        return await self._write(op)

    @staticmethod
    def _holder(conn: sqlite3.Connection, job: Job) -> str | None:
        """The id of the job of ``job``'s tenant holding its key (None: the run's slot was
        taken under another key)."""
        row = conn.execute(
            "SELECT id FROM jobs WHERE tenant_id = ? AND idempotency_key = ?",
            (job.tenant_id, job.idempotency_key),
        ).fetchone()
        return None if row is None else str(row[0])

    async def insert_many(self, jobs: Sequence[Job]) -> list[InsertOutcome]:
        """One transaction (one group commit): an ``INSERT ... ON CONFLICT DO NOTHING`` per
        job, then one query for the holders of the keys that were taken."""
        if not jobs:
            return []
        unique, later = first_of_each_key(jobs)
        columns = list(_COLUMNS.values())
        sql = (
            f"INSERT INTO jobs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            "ON CONFLICT DO NOTHING"
        )
        rows = [[_to_db(field, getattr(job, field)) for field in _COLUMNS] for job in unique]

        def op(conn: sqlite3.Connection) -> list[InsertOutcome]:
            taken: list[int] = []
            for i, params in enumerate(rows):
                if conn.execute(sql, params).rowcount == 0:
                    taken.append(i)
            # Keys are unique per tenant: the holder of a taken key is looked up in its tenant.
            holders: dict[tuple[str, str], str] = {}
            keys = [unique[i].idempotency_key for i in taken]
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                for tenant, key, holder in conn.execute(
                    "SELECT tenant_id, idempotency_key, id FROM jobs "
                    f"WHERE idempotency_key IN ({', '.join('?' * len(chunk))})",
                    chunk,
                ):
                    holders[(tenant, key)] = holder
            stored: list[InsertOutcome] = list(unique)
            for i in taken:
                job = unique[i]
                stored[i] = duplicate_of(job, holders.get((job.tenant_id, job.idempotency_key)))
            return stored

        return spread_outcomes(jobs, await self._write(op), later)

    async def get(self, job_id: str) -> Job:
        def op(conn: sqlite3.Connection) -> Job | None:
            row = conn.execute(f"SELECT {_SELECT} FROM jobs WHERE id = ?", (job_id,)).fetchone()
            return _from_row(row) if row else None

        job = await self._read(op)
        if job is None:
            raise JobNotFound(f"job {job_id} not found")
        return job

    async def find_run(self, template_id: str, fire_at: datetime) -> Job | None:
        sql = f"SELECT {_SELECT} FROM jobs WHERE template_id = ? AND fire_at = ?"
        params = (template_id, _to_db("fire_at", fire_at))

        def op(conn: sqlite3.Connection) -> Job | None:
            row = conn.execute(sql, params).fetchone()
            return _from_row(row) if row else None

        return await self._read(op)

    async def list_jobs(self, tenant_id: str, status: Status | None, limit: int) -> list[Job]:
        if status is None:
            sql = (
                f"SELECT {_SELECT} FROM jobs WHERE tenant_id = ? "
                "ORDER BY created_at DESC, id DESC LIMIT ?"
            )
            params: tuple[Any, ...] = (tenant_id, limit)
        else:
            sql = (
                f"SELECT {_SELECT} FROM jobs WHERE tenant_id = ? AND status = ? "
                "ORDER BY created_at DESC, id DESC LIMIT ?"
            )
            params = (tenant_id, status.value, limit)
        return await self._read(lambda conn: [_from_row(r) for r in conn.execute(sql, params)])

    async def claim_due(self, now: datetime, limit: int) -> list[Job]:
        fields = claim_fields(now)
        assignments = ", ".join(f"{_COLUMNS[f]} = ?" for f in fields)
        values = [_to_db(f, v) for f, v in fields.items()]
        now_ms = _to_db("scheduled_at", now)
        # Claim order is priority desc, then scheduled_at asc. Sorting every due job on each
        # claim would cost O(due) per batch (O(due^2) to drain a burst), so walk the
        # priority levels through the jobs_claim index instead (a manual skip-scan): the
        # highest level first, and within a level the due range in scheduled_at order. The
        # cost is O(log n) per level visited plus the rows claimed. Select and flip happen in
        # the writer's transaction, so no other claimer can interleave.
        claim_level = (
            f"UPDATE jobs SET {assignments} WHERE id IN ("
            "  SELECT id FROM jobs WHERE status = 'pending' AND cron IS NULL"
            "  AND priority = ? AND scheduled_at <= ? ORDER BY scheduled_at ASC, id ASC LIMIT ?"
            f") RETURNING {_SELECT}"
        )
        top_level = "SELECT MAX(priority) FROM jobs WHERE status = 'pending' AND cron IS NULL"
        next_level = top_level + " AND priority < ?"

        def op(conn: sqlite3.Connection) -> list[Job]:
            jobs: list[Job] = []
            level = conn.execute(top_level).fetchone()[0]
            while level is not None and len(jobs) < limit:
                rows = conn.execute(claim_level, (*values, level, now_ms, limit - len(jobs)))
                batch = [_from_row(r) for r in rows]
                batch.sort(key=lambda j: (j.scheduled_at, j.id))
                jobs.extend(batch)
                level = conn.execute(next_level, (level,)).fetchone()[0]
            return jobs

        return await self._write(op)

    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        sql = (
            f"SELECT {_SELECT} FROM jobs WHERE status = 'pending' AND scheduled_at <= ? "
            "AND cron IS NOT NULL ORDER BY scheduled_at ASC, id ASC LIMIT ?"
        )
        params = (_to_db("scheduled_at", now), limit)
        return await self._read(lambda conn: [_from_row(r) for r in conn.execute(sql, params)])

    async def next_due_at(self) -> datetime | None:
        def op(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(
                "SELECT MIN(scheduled_at) FROM jobs WHERE status = 'pending'"
            ).fetchone()
            return row[0] if row else None

        value = await self._read(op)
        return None if value is None else _EPOCH + timedelta(milliseconds=value)

    @staticmethod
    def _change_sql(change: Change, *, returning: bool = True) -> tuple[str, list[Any]]:
        """The UPDATE applying ``change`` and its parameters."""
        params: list[Any] = [_to_db(f, v) for f, v in change.set.items()]
        params.append(change.job_id)
        shape: list[tuple[str, int]] = []
        for field, expected in change.expect.items():
            if isinstance(expected, tuple):
                shape.append((field, len(expected)))
                params.extend(_to_db(field, v) for v in expected)
            elif expected is None:
                shape.append((field, -1))
            else:
                shape.append((field, 0))
                params.append(_to_db(field, expected))
        inc = tuple(change.inc)
        if inc:
            params[len(change.set) : len(change.set)] = [change.inc[f] for f in inc]
        return _update_sql(tuple(change.set), tuple(shape), inc, returning), params

    @classmethod
    def _change_op(
        cls, change: Change, records: list[tuple[Any, ...]] | None = None
    ) -> Callable[[sqlite3.Connection], Job | None]:
        """The operation applying ``change``. Its attempt record, if it applies, is written
        at once, or appended to ``records`` for the caller to write in the same transaction."""
        sql, params = cls._change_sql(change)
        record = None if change.record is None else attempt_params(change.record)

        def op(conn: sqlite3.Connection) -> Job | None:
            row = conn.execute(sql, params).fetchone()
            if row is None:
                return None
            if record is not None:  # in the transition's transaction, only if it applied
                if records is None:
                    conn.execute(INSERT_ATTEMPT, record)
                else:
                    records.append(record)
            return _from_row(row)

        return op

    async def apply(self, change: Change) -> Job | None:
        return await self._write(self._change_op(change))

    async def apply_many(self, changes: Sequence[Change]) -> list[Job | None]:
        def op(conn: sqlite3.Connection) -> list[Job | None]:
            # The records of the changes that applied, written by one executemany at the end
            # of this operation (same transaction: all of it lands, or none).
            records: list[tuple[Any, ...]] = []
            results = [self._change_op(change, records)(conn) for change in changes]
            if records:
                conn.executemany(INSERT_ATTEMPT, records)
            return results

        return await self._write(op)

    async def apply_many_lean(
        self, changes: Sequence[Change], read_back: Sequence[bool]
    ) -> list[Job | bool]:
        """One operation, like :meth:`apply_many`; the changes not read back are run without
        ``RETURNING`` (their row is neither fetched nor decoded)."""
        plan: list[tuple[str, list[Any], bool, tuple[Any, ...] | None]] = []
        for change, want in zip(changes, read_back, strict=True):
            sql, params = self._change_sql(change, returning=want)
            record = None if change.record is None else attempt_params(change.record)
            plan.append((sql, params, want, record))

        def op(conn: sqlite3.Connection) -> list[Job | bool]:
            records: list[tuple[Any, ...]] = []
            results: list[Job | bool] = []
            for sql, params, want, record in plan:
                cursor = conn.execute(sql, params)
                if want:
                    row = cursor.fetchone()
                    result: Job | bool = False if row is None else _from_row(row)
                else:
                    result = cursor.rowcount > 0
                if result is not False and record is not None:
                    records.append(record)
                results.append(result)
            if records:
                conn.executemany(INSERT_ATTEMPT, records)
            return results

        return await self._write(op)

    async def find_stale(
        self, statuses: Sequence[Status], field: str, before: datetime, limit: int
    ) -> list[Job]:
        column = _COLUMNS[field]
        if field not in _TIME_FIELDS:
            raise ValueError(f"not a time field: {field}")
        # Statuses are inlined (enum values, never user input) so that the condition is the
        # literal text of a partial index's WHERE, which SQLite needs to use that index.
        status_list = ", ".join(f"'{Status(s).value}'" for s in sorted(set(statuses)))
        sql = (
            f"SELECT {_SELECT} FROM jobs WHERE status IN ({status_list}) "
            f"AND ({column} IS NULL OR {column} < ?) ORDER BY {column} ASC LIMIT ?"
        )
        params = (_to_db(field, before), limit)
        return await self._read(lambda conn: [_from_row(r) for r in conn.execute(sql, params)])

    async def count_by_status(self) -> dict[Status, int]:
        rows = await self._read(
            lambda conn: conn.execute(
                "SELECT status, COUNT(*) FROM jobs GROUP BY status"
            ).fetchall()
        )
        counts = dict.fromkeys(Status, 0)
        for status, count in rows:
            counts[Status(status)] = count
        return counts

    # ------------------------------------------------------------------ cron ledger

    async def record_occurrences(
        self, records: Sequence[Occurrence]
    ) -> list[tuple[Occurrence, bool]]:
        if not records:
            return []
        return await self._write(lambda conn: sqlite_ledger.record(conn, records))

    async def occurrences(
        self,
        template_id: str,
        *,
        limit: int,
        before: datetime | None = None,
        statuses: Sequence[OccurrenceStatus] | None = None,
    ) -> list[Occurrence]:
        return await self._read(
            lambda conn: sqlite_ledger.select(conn, template_id, before, limit, statuses)
        )

    async def prune_occurrences(self, before: datetime) -> int:
        return await self._write(lambda conn: sqlite_ledger.prune(conn, before))

    async def buffered_templates(self, limit: int) -> list[Job]:
        sql = (
            f"SELECT {_SELECT} FROM jobs WHERE cron_buffered IS NOT NULL AND status = 'pending' "
            "ORDER BY cron_buffered ASC LIMIT ?"
        )
        return await self._read(lambda conn: [_from_row(r) for r in conn.execute(sql, (limit,))])

    async def attempts(self, job_id: str) -> list[Attempt]:
        sql = (
            f"SELECT {', '.join(ATTEMPT_COLUMNS)} FROM attempts WHERE job_id = ? "
            "ORDER BY number ASC, finished_at ASC"
        )
        return await self._read(
            lambda conn: [attempt_from_row(r) for r in conn.execute(sql, (job_id,))]
        )

    async def prune_attempts(self, before: datetime) -> int:
        cutoff = millis(before)
        return await self._write(
            lambda conn: (
                conn.execute("DELETE FROM attempts WHERE finished_at < ?", (cutoff,)).rowcount
            )
        )

    # ------------------------------------------------------------------ management

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        sql, params = find_sql(query, limit, after, select=_SELECT, millis=_millis)
        return await self._read(lambda conn: [_from_row(r) for r in conn.execute(sql, params)])

    async def apply_bulk(self, changes: Sequence[Change]) -> int:
        """All in one write transaction (one thread hop), no row read back."""
        results = await self.apply_many_lean(changes, [False] * len(changes))
        return sum(result is True for result in results)

    async def stats(self, tenant_id: str | None, now: datetime) -> JobStats:
        queries = stats_sql(tenant_id, now, millis=_millis)

        def op(conn: sqlite3.Connection) -> list[list[Any]]:
            return [conn.execute(sql, params).fetchall() for sql, params in queries]

        counts_rows, oldest_rows, window_rows = await self._read(op)
        finished = {status: sums for status, *sums in window_rows}
        windows = tuple(
            Window(
                minutes=minutes,
                completed=int((finished.get("completed") or [0] * 3)[i] or 0),
                failed=int((finished.get("dlq") or [0] * 3)[i] or 0),
            )
            for i, minutes in enumerate(STATS_WINDOWS)
        )
        return JobStats(
            counts={(Status(st), jt): n for st, jt, n in counts_rows},
            oldest_due_at=(
                _EPOCH + timedelta(milliseconds=oldest_rows[0][0]) if oldest_rows else None
            ),
            windows=windows,
        )


def _millis(dt: datetime) -> int:
    value: int = _to_db("created_at", dt)
    return value
