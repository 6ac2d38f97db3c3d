"""The SQLite store's histories and management: the cron ledger, attempt records,
buffered templates, filtered listing, bulk changes, statistics and counts.

A mixin of :class:`~jobscheduler.store.sqlite.store.SQLiteJobStore`, on the ``_read``/``_write``
of :class:`~jobscheduler.store.sqlite.conn.SQLiteConnection` and the store's
``apply_many_lean``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobscheduler.domain.attempts import Attempt
from jobscheduler.domain.cron import Occurrence, OccurrenceStatus
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import Change
from jobscheduler.store.query import STATS_WINDOWS, Cursor, JobQuery, JobStats, Window

from . import ledger as sqlite_ledger
from .attempts import ATTEMPT_COLUMNS, attempt_from_row, millis
from .codec import _EPOCH, _SELECT, _from_row, _millis
from .conn import SQLiteConnection
from .query import find_sql, stats_sql


class SQLiteManageMixin(SQLiteConnection):
    """Everything of the store beside the jobs' own lifecycle, on the same SQLite file."""

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
            f"SELECT {_SELECT} FROM jobs INDEXED BY jobs_cron_buffered "
            "WHERE cron_buffered IS NOT NULL AND status = 'pending' "
            "ORDER BY cron_buffered ASC LIMIT ?"
        )
        return await self._read(lambda conn: [_from_row(r) for r in conn.execute(sql, (limit,))])

    async def attempts(self, job_id: str) -> list[Attempt]:
        sql = (
            f"SELECT {', '.join(ATTEMPT_COLUMNS)} FROM attempts WHERE job_id = ? "
            "ORDER BY run ASC, number ASC, finished_at ASC"
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
