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
from jobscheduler.store.ends import stats_first_step, windows_of
from jobscheduler.store.query import (
    DUE_ONE_OFF,
    Cursor,
    JobCounts,
    JobQuery,
    JobStats,
    Sort,
    Statuses,
)

from .codec import _EPOCH, _SELECT, _from_row, _millis
from .conn import SQLiteConnection
from .ends import ends_sql
from .where import conditions, status_condition, where_clause

#: Indexes of the management queries. Created after the column migration, since they name
#: columns an older file gains there.
MANAGE_INDEXES = """
CREATE INDEX IF NOT EXISTS jobs_tenant_type ON jobs (tenant_id, job_type, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS jobs_template ON jobs (template_id, created_at DESC, id DESC)
    WHERE template_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_status_created ON jobs (status, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS jobs_tenant_scheduled ON jobs (tenant_id, scheduled_at, id);
CREATE INDEX IF NOT EXISTS jobs_tenant_status_scheduled
    ON jobs (tenant_id, status, scheduled_at, id);
-- Listings across tenants (an all-tenant admin's dashboard): newest jobs, newest templates.
CREATE INDEX IF NOT EXISTS jobs_created ON jobs (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS jobs_templates_created ON jobs (created_at DESC, id DESC)
    WHERE cron IS NOT NULL;
"""

Millis = Callable[[datetime], int]


def find_sql(
    query: JobQuery, limit: int, after: Cursor | None, *, select: str, millis: Millis
) -> tuple[str, list[Any]]:
    """``SELECT select FROM jobs WHERE ... ORDER BY <sort field> <dir>, id <dir> LIMIT ?``
    (the query's :class:`Sort`; by default ``created_at DESC, id DESC``)."""
    terms, params = conditions(query, millis)
    # A spawner's children, page by page by age (see workflows.STEP_INDEXES).
    table = "jobs INDEXED BY jobs_spawned_pages" if query.spawned_by is not None else "jobs"
    return keyset_sql(select, table, terms, params, query.sort, after, limit, millis)


def keyset_sql(
    select: str,
    table: str,
    terms: list[str],
    params: list[Any],
    sort: Sort,
    after: Cursor | None,
    limit: int,
    millis: Millis,
) -> tuple[str, list[Any]]:
    """``SELECT select FROM table WHERE terms ORDER BY <sort field> <dir>, id <dir> LIMIT ?``
    and its parameters: a page of a listing in ``sort``'s order, strictly after ``after``
    when given (``terms``/``params``: the listing's conditions, extended in place)."""
    column = _SORT_COLUMNS[sort]
    direction = "DESC" if sort.descending else "ASC"
    if after is not None:
        terms.append(f"({column}, id) {'<' if sort.descending else '>'} (?, ?)")
        params += [millis(after.at), after.id]
    where = f"WHERE {' AND '.join(terms)} " if terms else ""
    order = f"ORDER BY {column} {direction}, id {direction}"
    sql = f"SELECT {select} FROM {table} {where}{order} LIMIT ?"
    params.append(limit)
    return sql, params


_SORT_COLUMNS = {
    Sort.CREATED_DESC: "created_at",
    Sort.CREATED_ASC: "created_at",
    Sort.SCHEDULED_DESC: "scheduled_at",
    Sort.SCHEDULED_ASC: "scheduled_at",
}


def oldest_due_sql(tenant_id: str | None, now: datetime) -> tuple[str, list[Any]]:
    """The ``scheduled_at`` of the oldest due pending one-off job (of a tenant, or of all).

    Across tenants it walks ``jobs_due`` in order (SQLite, planning without statistics,
    would rather read every pending job through ``jobs_status_created``); a tenant's walks
    ``jobs_tenant_status_scheduled``.
    """
    where, params = where_clause(DUE_ONE_OFF.of_tenant(tenant_id).due(now), _millis)
    hint = "INDEXED BY jobs_due " if tenant_id is None else ""
    return f"SELECT scheduled_at FROM jobs {hint}{where} ORDER BY scheduled_at ASC LIMIT 1", params


def count_sql(tenant_id: str | None, statuses: Statuses, by_type: bool) -> tuple[str, list[Any]]:
    """The store's one count (:meth:`~jobscheduler.store.base.JobStore.count_jobs`): jobs by
    status (and job type) of a tenant, or of all, in some statuses or all, added up from the
    counters (``job_counts``, kept by triggers: see :mod:`.upkeep`); no job is read."""
    columns = "status, job_type" if by_type else "status"
    terms, params = (["tenant_id = ?"], [tenant_id]) if tenant_id is not None else ([], [])
    if statuses:
        terms.append(status_condition(statuses))
    where = f"WHERE {' AND '.join(terms)} " if terms else ""
    sql = f"SELECT {columns}, SUM(n) FROM job_counts {where}GROUP BY {columns} HAVING SUM(n) != 0"
    return sql, params


def counts_of(rows: Sequence[Sequence[Any]], statuses: Statuses, by_type: bool) -> JobCounts:
    """The :class:`JobCounts` of :func:`count_sql`'s rows."""
    if by_type:
        return JobCounts.of_types(statuses, {(Status(s), t): n for s, t, n in rows})
    return JobCounts.of_statuses(statuses, {Status(s): n for s, n in rows})


def stats_sql(tenant_id: str | None, now: datetime) -> list[tuple[str, list[Any]]]:
    """The three stats queries: counts by (status, job type); the oldest due pending
    one-off job's ``scheduled_at``; the counters of ends of the widest window's steps."""
    counts = count_sql(tenant_id, None, by_type=True)
    oldest = oldest_due_sql(tenant_id, now)
    return [counts, oldest, ends_sql(tenant_id, stats_first_step(now))]


class SQLiteQueryMixin(SQLiteConnection):
    """Counts, filtered listing, bulk changes and statistics on the store's SQLite file."""

    if TYPE_CHECKING:  # provided by SQLiteJobStore

        async def apply_many_lean(
            self, changes: Sequence[Change], read_back: Sequence[bool]
        ) -> list[Job | bool]: ...

    async def count_jobs(
        self, tenant_id: str | None, statuses: Statuses = None, *, by_type: bool = False
    ) -> JobCounts:
        sql, params = count_sql(tenant_id, statuses, by_type)
        rows = await self._read(lambda conn: conn.execute(sql, params).fetchall())
        return counts_of(rows, statuses, by_type)

    async def tenants(self, limit: int) -> list[str]:
        # A skip scan of an index leading with tenant_id: one seek per tenant, whatever the
        # jobs' count (``SELECT DISTINCT`` would read every index entry).
        sql = """
            WITH RECURSIVE tenant(id, n) AS (
                SELECT MIN(tenant_id), 1 FROM jobs
                UNION ALL
                SELECT (SELECT MIN(tenant_id) FROM jobs WHERE tenant_id > tenant.id), n + 1
                FROM tenant WHERE tenant.id IS NOT NULL AND n < ?
            )
            SELECT id FROM tenant WHERE id IS NOT NULL
        """
        if limit <= 0:
            return []
        return await self._read(lambda conn: [row[0] for row in conn.execute(sql, (limit,))])

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
        queries = stats_sql(tenant_id, now)

        def op(conn: sqlite3.Connection) -> list[list[Any]]:
            return [conn.execute(sql, params).fetchall() for sql, params in queries]

        counts_rows, oldest_rows, ends_rows = await self._read(op)
        windows = windows_of(((Status(s), step, n) for s, step, n in ends_rows), now)
        return JobStats(
            counts=counts_of(counts_rows, None, by_type=True).by_type or {},
            oldest_due_at=(
                _EPOCH + timedelta(milliseconds=oldest_rows[0][0]) if oldest_rows else None
            ),
            windows=windows,
        )
