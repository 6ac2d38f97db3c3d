"""The SQLite store's presence records (``workers`` table) and the Overview's reads.

A mixin of :class:`~jobscheduler.store.sqlite.store.SQLiteJobStore`, on the ``_read``/``_write``
of :class:`~jobscheduler.store.sqlite.conn.SQLiteConnection`; the table is created with the
jobs schema at ``start``.
Every Overview read is answered from counters or an index: counts by status from
``job_counts``, the oldest due job from ``jobs_due``, the jobs that ended in the last hour
from ``job_ends`` (:mod:`.ends`).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from jobscheduler.domain.model import Status
from jobscheduler.domain.overview import OverviewStats, series_start
from jobscheduler.domain.workers import WorkerBeat
from jobscheduler.store.ends import series_of, step_of

from .codec import from_millis, to_millis
from .conn import SQLiteConnection
from .ends import ends_sql
from .query import count_sql, counts_of, oldest_due_sql
from .rows import Column, Rows, millis_column

WORKERS_SCHEMA = """
CREATE TABLE IF NOT EXISTS workers (
    id         TEXT PRIMARY KEY,
    role       TEXT NOT NULL,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    job_types  TEXT NOT NULL,
    in_flight  INTEGER NOT NULL,
    leader     INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS workers_expires ON workers (expires_at);
"""


def migrate_workers(conn: sqlite3.Connection) -> None:
    """Add ``capacity`` to a workers table made before executors reported it."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(workers)")}
    if "capacity" not in present:
        conn.execute("ALTER TABLE workers ADD COLUMN capacity INTEGER NOT NULL DEFAULT 0")


def _job_types(stored: str) -> tuple[str, ...]:
    return tuple(json.loads(stored))


_BEATS = Rows(
    WorkerBeat,
    Column("id"),
    Column("role"),
    Column("host"),
    Column("pid", load=int),
    Column("job_types", store=lambda types: json.dumps(list(types)), load=_job_types),
    Column("in_flight", load=int),
    Column("leader", store=int, load=bool),
    millis_column("started_at"),
    millis_column("seen_at"),
    millis_column("expires_at"),
    Column("capacity", load=int),
)


def overview_sql(
    tenant_id: str | None, now: datetime, start: datetime
) -> list[tuple[str, list[Any]]]:
    """The Overview's queries: counts by status; the oldest due pending one-off job; the
    counters of ends of the steps since ``start`` (no job is read)."""
    counts = count_sql(tenant_id, None, by_type=False)
    oldest = oldest_due_sql(tenant_id, now)
    return [counts, oldest, ends_sql(tenant_id, step_of(start))]


class SQLiteWorkersMixin(SQLiteConnection):
    """Presence records and the Overview's figures on the store's SQLite file."""

    async def beat_worker(self, beat: WorkerBeat) -> None:
        params = _BEATS.params(beat)
        sql = (
            f"{_BEATS.insert('workers')} "
            "ON CONFLICT (id) DO UPDATE SET role = excluded.role, host = excluded.host, "
            "pid = excluded.pid, job_types = excluded.job_types, "
            "in_flight = excluded.in_flight, leader = excluded.leader, "
            "started_at = excluded.started_at, seen_at = excluded.seen_at, "
            "expires_at = excluded.expires_at, capacity = excluded.capacity"
        )

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(sql, params)

        await self._write(op)

    async def live_workers(self, now: datetime) -> list[WorkerBeat]:
        sql = f"SELECT {_BEATS.select} FROM workers WHERE expires_at > ? ORDER BY role, id"
        return await self._read(
            lambda conn: [_BEATS.load(r) for r in conn.execute(sql, (to_millis(now),))]
        )

    async def forget_worker(self, worker_id: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM workers WHERE id = ?", (worker_id,))

        await self._write(op)

    async def prune_workers(self, now: datetime) -> int:
        def op(conn: sqlite3.Connection) -> int:
            return conn.execute(
                "DELETE FROM workers WHERE expires_at <= ?", (to_millis(now),)
            ).rowcount

        return await self._write(op)

    async def overview_stats(self, tenant_id: str | None, now: datetime) -> OverviewStats:
        start = series_start(now)
        queries = overview_sql(tenant_id, now, start)

        def op(conn: sqlite3.Connection) -> list[list[Any]]:
            return [conn.execute(sql, params).fetchall() for sql, params in queries]

        counts_rows, oldest_rows, ends_rows = await self._read(op)
        series = series_of(((Status(s), step, n) for s, step, n in ends_rows), start)
        return OverviewStats(
            counts=counts_of(counts_rows, None, by_type=False).by_status,
            oldest_due_at=from_millis(oldest_rows[0][0]) if oldest_rows else None,
            start=start,
            completed=series[Status.COMPLETED],
            failed=series[Status.DLQ],
        )


__all__ = ["WORKERS_SCHEMA", "SQLiteWorkersMixin", "overview_sql"]
