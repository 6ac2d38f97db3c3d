"""The jobs' transitions in SQLite: the scheduler's claim and its pass reads, the conditional
updates of every state change (with their attempt records and events, in the same
transaction), and the reaper's sweeps.

:class:`SQLiteTransitionsMixin` is a mixin of
:class:`~jobscheduler.store.sqlite.store.SQLiteJobStore`, on the ``_read``/``_write`` of
:class:`~jobscheduler.store.sqlite.conn.SQLiteConnection`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from jobscheduler.domain.model import JOB_TIME_FIELDS, Job, Status
from jobscheduler.domain.states import IN_FLIGHT, Change, claim_fields
from jobscheduler.store.query import BUFFERED, DUE_ONE_OFF, DUE_TEMPLATE, PENDING, PassReads

from .attempts import INSERT_ATTEMPT, attempt_params
from .codec import _COLUMNS, _EPOCH, _SELECT, _from_row, _millis, _to_db, _update_sql
from .conn import SQLiteConnection
from .notifications import INSERT_EVENT, event_params
from .where import QUEUED, index_where, status_condition, where_clause

#: The partial index of each reaper sweep (its statuses, its time field). SQLite plans
#: without statistics and would rather take ``jobs_status_created`` (``status=?``), which
#: walks every job of the status; the sweeps name their index.
_STALE_INDEXES = {
    (frozenset(QUEUED), "queued_at"): "jobs_queued",
    (frozenset(IN_FLIGHT), "heartbeat_at"): "jobs_in_flight",
}

#: The earliest due time of the pending jobs (one-offs and templates), off ``jobs_due``.
_NEXT_DUE = f"SELECT MIN(scheduled_at) FROM jobs INDEXED BY jobs_due WHERE {index_where(PENDING)}"


class SQLiteTransitionsMixin(SQLiteConnection):
    """Claims, transitions and sweeps of :class:`~jobscheduler.store.base.Transitions`."""

    async def claim_due(self, now: datetime, limit: int) -> list[Job]:
        fields = claim_fields(now)
        assignments = ", ".join(f"{_COLUMNS[f]} = ?" for f in fields)
        values = [_to_db(f, v) for f, v in fields.items()]
        # Claim order is priority desc, then scheduled_at asc. Sorting every due job on each
        # claim would cost O(due) per batch (O(due^2) to drain a burst), so walk the
        # priority levels through the jobs_claim index instead (a manual skip-scan): the
        # highest level first, and within a level the due range in scheduled_at order. The
        # cost is O(log n) per level visited plus the rows claimed. Select and flip happen in
        # the writer's transaction, so no other claimer can interleave.
        due, due_params = where_clause(DUE_ONE_OFF.due(now), _millis)
        claim_level = (
            f"UPDATE jobs SET {assignments} WHERE id IN ("
            f"  SELECT id FROM jobs INDEXED BY jobs_claim {due} AND priority = ?"
            "  ORDER BY scheduled_at ASC, id ASC LIMIT ?"
            f") RETURNING {_SELECT}"
        )
        top_level = (
            f"SELECT MAX(priority) FROM jobs INDEXED BY jobs_claim WHERE {index_where(DUE_ONE_OFF)}"
        )
        next_level = top_level + " AND priority < ?"

        def op(conn: sqlite3.Connection) -> list[Job]:
            jobs: list[Job] = []
            level = conn.execute(top_level).fetchone()[0]
            while level is not None and len(jobs) < limit:
                rows = conn.execute(claim_level, (*values, *due_params, level, limit - len(jobs)))
                batch = [_from_row(r) for r in rows]
                batch.sort(key=lambda j: (j.scheduled_at, j.id))
                jobs.extend(batch)
                level = conn.execute(next_level, (level,)).fetchone()[0]
            return jobs

        # A claim cancelled by its deadline stops waiting (the port allows it: its jobs stay
        # queued for the reaper) rather than hold the scheduler on a stalled disk.
        return await self._write(op, abandon_on_cancel=True)

    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        due, params = where_clause(DUE_TEMPLATE.due(now), _millis)
        sql = (
            f"SELECT {_SELECT} FROM jobs INDEXED BY jobs_templates_due {due} "
            "ORDER BY scheduled_at ASC, id ASC LIMIT ?"
        )
        params.append(limit)
        return await self._read(lambda conn: [_from_row(r) for r in conn.execute(sql, params)])

    async def pass_reads(self, now: datetime) -> PassReads:
        """The three reads of a scheduler pass in one thread hop (each is one probe of its
        partial index: the hop costs more than they do)."""
        due, due_params = where_clause(DUE_TEMPLATE.due(now), _millis)
        due_sql = f"SELECT 1 FROM jobs INDEXED BY jobs_templates_due {due} LIMIT 1"
        held, held_params = where_clause(BUFFERED, _millis)
        held_sql = f"SELECT 1 FROM jobs INDEXED BY jobs_cron_buffered {held} LIMIT 1"

        def op(conn: sqlite3.Connection) -> PassReads:
            first = conn.execute(_NEXT_DUE).fetchone()
            return PassReads(
                templates_due=conn.execute(due_sql, due_params).fetchone() is not None,
                buffers_held=conn.execute(held_sql, held_params).fetchone() is not None,
                next_due_at=None if first[0] is None else _EPOCH + timedelta(milliseconds=first[0]),
            )

        return await self._read(op)

    async def next_due_at(self) -> datetime | None:
        sql = _NEXT_DUE

        def op(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(sql).fetchone()
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
        events = [event_params(event) for event in change.events]

        def op(conn: sqlite3.Connection) -> Job | None:
            row = conn.execute(sql, params).fetchone()
            if row is None:
                return None
            if record is not None:  # in the transition's transaction, only if it applied
                if records is None:
                    conn.execute(INSERT_ATTEMPT, record)
                else:
                    records.append(record)
            if events:  # the same: a job reaching dlq and its events land together
                conn.executemany(INSERT_EVENT, events)
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
        plan: list[tuple[str, list[Any], bool, tuple[Any, ...] | None, Change]] = []
        for change, want in zip(changes, read_back, strict=True):
            sql, params = self._change_sql(change, returning=want)
            record = None if change.record is None else attempt_params(change.record)
            plan.append((sql, params, want, record, change))

        def op(conn: sqlite3.Connection) -> list[Job | bool]:
            records: list[tuple[Any, ...]] = []
            events: list[tuple[Any, ...]] = []
            results: list[Job | bool] = []
            for sql, params, want, record, change in plan:
                cursor = conn.execute(sql, params)
                if want:
                    row = cursor.fetchone()
                    result: Job | bool = False if row is None else _from_row(row)
                else:
                    result = cursor.rowcount > 0
                if result is not False:
                    if record is not None:
                        records.append(record)
                    events.extend(event_params(event) for event in change.events)
                results.append(result)
            if records:
                conn.executemany(INSERT_ATTEMPT, records)
            if events:
                conn.executemany(INSERT_EVENT, events)
            return results

        return await self._write(op)

    async def find_stale(
        self, statuses: Sequence[Status], field: str, before: datetime, limit: int
    ) -> list[Job]:
        column = _COLUMNS[field]
        if field not in JOB_TIME_FIELDS:
            raise ValueError(f"not a time field: {field}")
        # The status condition reads as the partial index's WHERE (see where.py).
        index = _STALE_INDEXES.get((frozenset(Status(s) for s in statuses), field))
        hint = f"INDEXED BY {index} " if index else ""
        sql = (
            f"SELECT {_SELECT} FROM jobs {hint}WHERE {status_condition(statuses)} "
            f"AND ({column} IS NULL OR {column} < ?) ORDER BY {column} ASC LIMIT ?"
        )
        params = (_to_db(field, before), limit)
        return await self._read(lambda conn: [_from_row(r) for r in conn.execute(sql, params)])
