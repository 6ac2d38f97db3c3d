"""The SQLite store's management reads: job filters with keyset pages, bulk changes, stats.

The SQL is built by pure functions returning (sql, params), so the shape of each query is
testable without a database. Status values are inlined (enum values, never user input) so
that conditions read as the literal text of a partial index's WHERE, which SQLite needs to
use that index. :class:`SQLiteQueryMixin` (a mixin of
:class:`~jobscheduler.store.sqlite.store.SQLiteJobStore`, on the ``_read``/``_write`` of
:class:`~jobscheduler.store.sqlite.conn.SQLiteConnection` and the store's
``apply_many_lean``) runs them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import Change
from jobscheduler.store.query import STATS_WINDOWS, Cursor, JobQuery, JobStats, Sort, Window

from .codec import _EPOCH, _SELECT, _from_row, _millis
from .conn import SQLiteConnection

#: Indexes of the management queries. Created after the column migration, since they name
#: columns an older file gains there.
MANAGE_INDEXES = """
CREATE INDEX IF NOT EXISTS jobs_tenant_type ON jobs (tenant_id, job_type, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS jobs_template ON jobs (template_id, created_at DESC, id DESC)
    WHERE template_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_status_created ON jobs (status, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs (updated_at)
    WHERE status IN ('completed', 'dlq');
CREATE INDEX IF NOT EXISTS jobs_tenant_templates ON jobs (tenant_id, created_at DESC, id DESC)
    WHERE cron IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_tenant_scheduled ON jobs (tenant_id, scheduled_at, id);
CREATE INDEX IF NOT EXISTS jobs_tenant_status_scheduled
    ON jobs (tenant_id, status, scheduled_at, id);
"""

#: Upper bound of the keys that start with a prefix (the highest code point).
_PREFIX_END = "\U0010ffff"

Millis = Callable[[datetime], int]


def _status_list(statuses: tuple[Status, ...]) -> str:
    return ", ".join(f"'{Status(s).value}'" for s in sorted(set(statuses)))


def find_sql(
    query: JobQuery, limit: int, after: Cursor | None, *, select: str, millis: Millis
) -> tuple[str, list[Any]]:
    """``SELECT select FROM jobs WHERE ... ORDER BY <sort field> <dir>, id <dir> LIMIT ?``
    (the query's :class:`Sort`; by default ``created_at DESC, id DESC``)."""
    conditions: list[str] = []
    params: list[Any] = []
    if query.tenant_id is not None:
        conditions.append("tenant_id = ?")
        params.append(query.tenant_id)
    if query.template_id is not None:
        conditions.append("template_id = ?")
        params.append(query.template_id)
    if query.job_type is not None:
        conditions.append("job_type = ?")
        params.append(query.job_type)
    if query.statuses:
        statuses = sorted(set(query.statuses))
        if len(statuses) == 1:
            conditions.append(f"status = '{statuses[0].value}'")
        else:
            conditions.append(f"status IN ({_status_list(query.statuses)})")
    if query.cron is not None:
        conditions.append("cron IS NOT NULL" if query.cron else "cron IS NULL")
    if query.created_after is not None:
        conditions.append("created_at >= ?")
        params.append(millis(query.created_after))
    if query.created_before is not None:
        conditions.append("created_at < ?")
        params.append(millis(query.created_before))
    conditions += _key_conditions(query, params)
    sort = query.sort
    column = _SORT_COLUMNS[sort]
    direction = "DESC" if sort.descending else "ASC"
    if after is not None:
        conditions.append(f"({column}, id) {'<' if sort.descending else '>'} (?, ?)")
        params += [millis(after.at), after.id]
    where = f"WHERE {' AND '.join(conditions)} " if conditions else ""
    order = f"ORDER BY {column} {direction}, id {direction}"
    sql = f"SELECT {select} FROM jobs {where}{order} LIMIT ?"
    params.append(limit)
    return sql, params


_SORT_COLUMNS = {
    Sort.CREATED_DESC: "created_at",
    Sort.CREATED_ASC: "created_at",
    Sort.SCHEDULED_DESC: "scheduled_at",
    Sort.SCHEDULED_ASC: "scheduled_at",
}


def _key_conditions(query: JobQuery, params: list[Any]) -> list[str]:
    """The idempotency-key and id conditions (key ones served by ``jobs_tenant_key``)."""
    conditions: list[str] = []
    if query.idempotency_key is not None:
        conditions.append("idempotency_key = ?")
        params.append(query.idempotency_key)
    if query.key_prefix is not None:
        conditions.append("idempotency_key >= ? AND idempotency_key < ?")
        params += [query.key_prefix, query.key_prefix + _PREFIX_END]
    if query.ids:
        conditions.append(f"id IN ({', '.join('?' for _ in query.ids)})")
        params += list(query.ids)
    return conditions


def oldest_due_sql(tenant_id: str | None, now_ms: int) -> tuple[str, list[Any]]:
    """The ``scheduled_at`` of the oldest due pending one-off job (of a tenant, or of all).

    Across tenants it walks ``jobs_due`` in order (SQLite, planning without statistics,
    would rather read every pending job through ``jobs_status_created``); a tenant's walks
    ``jobs_tenant_status_scheduled``.
    """
    if tenant_id is None:
        return (
            "SELECT scheduled_at FROM jobs INDEXED BY jobs_due WHERE status = 'pending' "
            "AND cron IS NULL AND scheduled_at <= ? ORDER BY scheduled_at ASC LIMIT 1",
            [now_ms],
        )
    return (
        "SELECT scheduled_at FROM jobs WHERE status = 'pending' AND cron IS NULL "
        "AND scheduled_at <= ? AND tenant_id = ? ORDER BY scheduled_at ASC LIMIT 1",
        [now_ms, tenant_id],
    )


def stats_sql(
    tenant_id: str | None, now: datetime, *, millis: Millis
) -> list[tuple[str, list[Any]]]:
    """The three stats queries: counts by (status, job type); the oldest due pending
    one-off job's ``scheduled_at``; per finished status, the count in each window."""
    tenant = " AND tenant_id = ?" if tenant_id is not None else ""
    tenant_params = [tenant_id] if tenant_id is not None else []
    counts = (
        "SELECT status, job_type, COUNT(*) FROM jobs"
        + (" WHERE tenant_id = ?" if tenant_id is not None else "")
        + " GROUP BY status, job_type",
        list(tenant_params),
    )
    oldest = oldest_due_sql(tenant_id, millis(now))
    starts = [millis(now - timedelta(minutes=m)) for m in STATS_WINDOWS]
    sums = ", ".join("SUM(updated_at >= ?)" for _ in STATS_WINDOWS)
    # Across tenants, SQLite would rather walk jobs_status_created (status=?) than the
    # window of jobs_finished; a tenant's query takes jobs_tenant_status.
    hint = "" if tenant_id is not None else "INDEXED BY jobs_finished "
    windows = (
        f"SELECT status, {sums} FROM jobs {hint}WHERE status IN ('completed', 'dlq') "
        f"AND updated_at >= ?{tenant} GROUP BY status",
        [*starts, min(starts), *tenant_params],
    )
    return [counts, oldest, windows]


class SQLiteQueryMixin(SQLiteConnection):
    """Counts, filtered listing, bulk changes and statistics on the store's SQLite file."""

    if TYPE_CHECKING:  # provided by SQLiteJobStore

        async def apply_many_lean(
            self, changes: Sequence[Change], read_back: Sequence[bool]
        ) -> list[Job | bool]: ...

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

    # ------------------------------------------------------------------ management

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        sql, params = find_sql(query, limit, after, select=_SELECT, millis=_millis)
        return await self._read(lambda conn: [_from_row(r) for r in conn.execute(sql, params)])

    async def apply_bulk(self, changes: Sequence[Change]) -> int:
        """All in one write transaction (one batch of the writer), no row read back."""
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
