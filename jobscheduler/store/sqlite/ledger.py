"""The SQLite store's cron ledger: its table (beside ``jobs``), row codec and queries; and
the templates holding a buffered fire time (their partial index is one of
:mod:`~jobscheduler.store.sqlite.where`'s).

:class:`SQLiteLedgerMixin` is a mixin of :class:`~jobscheduler.store.sqlite.store.SQLiteJobStore`,
on the ``_read``/``_write`` of :class:`~jobscheduler.store.sqlite.conn.SQLiteConnection`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobscheduler.domain.cron import Occurrence, OccurrenceStatus, SkipReason
from jobscheduler.domain.model import Job
from jobscheduler.store.jobs import OccurrenceQuery
from jobscheduler.store.query import BUFFERED

from .codec import _SELECT as _JOB_SELECT
from .codec import _from_row as _job_from_row
from .codec import _millis as _job_millis
from .codec import to_millis
from .conn import SQLiteConnection, placeholders
from .rows import Column, Rows, enum_column, millis_column
from .where import where_clause

#: One row per (template, fire time); ``INSERT OR IGNORE`` keeps the first writer's row.
LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS occurrences (
    template_id     TEXT NOT NULL,
    fire_at         INTEGER NOT NULL,
    tenant_id       TEXT NOT NULL,
    status          TEXT NOT NULL,
    reason          TEXT,
    run_id          TEXT,
    recorded_at     INTEGER NOT NULL,
    cancelled_run_id TEXT,
    PRIMARY KEY (template_id, fire_at)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS occurrences_status ON occurrences (template_id, status, fire_at);
CREATE INDEX IF NOT EXISTS occurrences_recorded ON occurrences (recorded_at);
"""

_OCCURRENCES = Rows(
    Occurrence,
    Column("template_id"),
    millis_column("fire_at"),
    Column("tenant_id"),
    enum_column("status", OccurrenceStatus),
    enum_column("reason", SkipReason, nullable=True),
    Column("run_id"),
    millis_column("recorded_at"),
    Column("cancelled_run_id"),
)
_INSERT = _OCCURRENCES.insert("occurrences", "INSERT OR IGNORE")


def migrate(conn: sqlite3.Connection) -> None:
    """Create the ledger table and its indexes, adding ``cancelled_run_id`` to a table made
    before ``overlap="cancel_previous"`` existed (idempotent)."""
    conn.executescript(LEDGER_SCHEMA)
    present = {row[1] for row in conn.execute("PRAGMA table_info(occurrences)")}
    if "cancelled_run_id" not in present:
        conn.execute("ALTER TABLE occurrences ADD COLUMN cancelled_run_id TEXT")


def record(
    conn: sqlite3.Connection, records: Sequence[Occurrence]
) -> list[tuple[Occurrence, bool]]:
    """Insert each record unless its key exists; the stored record of each key and whether
    this call wrote it, in order."""
    stored = []
    for r in records:
        written = conn.execute(_INSERT, _OCCURRENCES.params(r)).rowcount == 1
        row = conn.execute(
            f"SELECT {_OCCURRENCES.select} FROM occurrences WHERE template_id = ? AND fire_at = ?",
            (r.template_id, to_millis(r.fire_at)),
        ).fetchone()
        stored.append((_OCCURRENCES.load(row), written))
    return stored


def select(conn: sqlite3.Connection, query: OccurrenceQuery, limit: int) -> list[Occurrence]:
    """The records ``query`` selects, newest fire time first, at most ``limit``."""
    conditions = ["template_id = ?"]
    params: list[Any] = [query.template_id]
    if query.tenant is not None:
        conditions.append("tenant_id = ?")
        params.append(query.tenant)
    if query.before is not None:
        conditions.append("fire_at < ?")
        params.append(to_millis(query.before))
    if query.statuses is not None:
        conditions.append(f"status IN ({placeholders(len(query.statuses))})")
        params.extend(s.value for s in query.statuses)
    sql = (
        f"SELECT {_OCCURRENCES.select} FROM occurrences WHERE {' AND '.join(conditions)} "
        "ORDER BY fire_at DESC LIMIT ?"
    )
    params.append(limit)
    return [_OCCURRENCES.load(row) for row in conn.execute(sql, params)]


def prune(conn: sqlite3.Connection, before: datetime) -> int:
    """Delete records written before ``before``; how many."""
    return conn.execute(
        "DELETE FROM occurrences WHERE recorded_at < ?", (to_millis(before),)
    ).rowcount


class SQLiteLedgerMixin(SQLiteConnection):
    """The cron ledger beside the jobs, and the templates that hold a buffered fire time."""

    async def record_occurrences(
        self, records: Sequence[Occurrence]
    ) -> list[tuple[Occurrence, bool]]:
        if not records:
            return []
        return await self._write(lambda conn: record(conn, records))

    async def occurrences(self, query: OccurrenceQuery, *, limit: int) -> list[Occurrence]:
        return await self._read(lambda conn: select(conn, query, limit))

    async def prune_occurrences(self, before: datetime) -> int:
        return await self._write(lambda conn: prune(conn, before))

    async def buffered_templates(self, limit: int) -> list[Job]:
        where, params = where_clause(BUFFERED, _job_millis)
        sql = (
            f"SELECT {_JOB_SELECT} FROM jobs INDEXED BY jobs_cron_buffered {where} "
            "ORDER BY cron_buffered ASC LIMIT ?"
        )
        params.append(limit)
        return await self._read(lambda conn: [_job_from_row(r) for r in conn.execute(sql, params)])
