"""The store's job predicates compiled to SQL, and the partial indexes built from them.

:func:`conditions` turns a :class:`~jobscheduler.store.query.JobQuery` into the terms of a
WHERE clause and their parameters. Statuses and the cron and buffer conditions are inlined
(enum values and fixed text, never user input): SQLite uses a partial index only when the
query's WHERE holds every term of the index's WHERE *as written* (``status IN ('queued')``
does not match an index on ``status = 'queued'``), so each partial index below takes its
WHERE from the same compiler (:func:`index_where`) as the queries it serves, and
:func:`sync_partial_indexes` rebuilds, at start, a partial index a file made by an older
version holds under another WHERE.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from jobscheduler.domain.model import Status
from jobscheduler.domain.states import FINAL, IN_FLIGHT
from jobscheduler.store.query import (
    DUE_ONE_OFF,
    DUE_TEMPLATE,
    PENDING,
    JobQuery,
)
from jobscheduler.store.workflows import STEPS_TO_SETTLE

Millis = Callable[[datetime], int]

#: Upper bound of the keys that start with a prefix (the highest code point).
_PREFIX_END = "\U0010ffff"


def status_condition(statuses: Iterable[Status]) -> str:
    """``status = 'a'`` for one status, ``status IN ('a', 'b')`` (sorted) for several."""
    values = sorted({Status(s).value for s in statuses})
    if len(values) == 1:
        return f"status = '{values[0]}'"
    return f"status IN ({', '.join(repr(v) for v in values)})"


def _static(query: JobQuery) -> list[str]:
    """The terms of ``query`` that take no parameter (what a partial index can hold)."""
    terms: list[str] = []
    if query.statuses:
        terms.append(status_condition(query.statuses))
    if query.cron is not None:
        terms.append("cron IS NOT NULL" if query.cron else "cron IS NULL")
    if query.buffered is not None:
        terms.append("cron_buffered IS NOT NULL" if query.buffered else "cron_buffered IS NULL")
    if query.step_dirty is not None:
        terms.append(f"step_dirty = {int(query.step_dirty)}")
    return terms


def finished_term(statuses: Iterable[Status]) -> list[str]:
    """``finished_at IS NULL`` when none of ``statuses`` is final, ``finished_at IS NOT
    NULL`` when every one is (the rule every transition keeps: a final status and only a
    final status has ``finished_at``), else nothing. The term the steps' indexes seek by
    (``jobs_workflow``, ``jobs_spawned``): they are keyed on ``finished_at`` rather than the
    status, so that a step's claim and start, which move its status but not ``finished_at``,
    leave them alone."""
    final = {Status(s) in FINAL for s in statuses}
    if final == {False}:
        return ["finished_at IS NULL"]
    if final == {True}:
        return ["finished_at IS NOT NULL"]
    return []


def index_where(query: JobQuery) -> str:
    """The WHERE text of the partial index of ``query``'s jobs (its parameterless terms)."""
    return " AND ".join(_static(query))


def given(pairs: Iterable[tuple[str, Any]]) -> tuple[list[str], list[Any]]:
    """The terms (each with one ``?``) whose value is not None, and those values, in order."""
    kept = [(term, value) for term, value in pairs if value is not None]
    return [term for term, _ in kept], [value for _, value in kept]


def conditions(query: JobQuery, millis: Millis) -> tuple[list[str], list[Any]]:
    """The terms of a WHERE clause selecting ``query``'s jobs (joined by AND) and their
    parameters, in order."""

    def ms(value: datetime | None) -> int | None:
        return None if value is None else millis(value)

    terms, params = given(
        [
            ("tenant_id = ?", query.tenant_id),
            ("template_id = ?", query.template_id),
            ("job_type = ?", query.job_type),
            ("workflow_id = ?", query.workflow_id),
            ("spawned_by = ?", query.spawned_by),
        ]
    )
    terms += _static(query)
    if query.statuses and (query.workflow_id is not None or query.spawned_by is not None):
        terms += finished_term(query.statuses)
    more, values = given(
        [
            ("created_at >= ?", ms(query.created_after)),
            ("created_at < ?", ms(query.created_before)),
            ("finished_at < ?", ms(query.finished_before)),
            ("scheduled_at <= ?", ms(query.due_by)),
            ("idempotency_key = ?", query.idempotency_key),
        ]
    )
    terms, params = terms + more, params + values
    if query.key_prefix is not None:
        terms.append("idempotency_key >= ? AND idempotency_key < ?")
        params += [query.key_prefix, query.key_prefix + _PREFIX_END]
    if query.ids:
        terms.append(f"id IN ({', '.join('?' for _ in query.ids)})")
        params += list(query.ids)
    return terms, params


def where_clause(query: JobQuery, millis: Millis) -> tuple[str, list[Any]]:
    """``WHERE <terms>`` (empty when ``query`` has none) and its parameters."""
    terms, params = conditions(query, millis)
    return (f"WHERE {' AND '.join(terms)}" if terms else ""), params


#: The statuses of the reaper's sweep of queued jobs whose wake-up was lost.
QUEUED: tuple[Status, ...] = (Status.QUEUED,)

#: The partial indexes of the jobs table: name -> (columns, the jobs it holds).
PARTIAL_INDEXES: dict[str, tuple[str, JobQuery]] = {
    # next_due_at: the earliest pending job; across tenants, the oldest due one-off job.
    "jobs_due": ("scheduled_at", PENDING),
    # claim_due walks it by priority level, then due time (store.py).
    "jobs_claim": ("priority, scheduled_at, id", DUE_ONE_OFF),
    # The fair claim walks it by level, then (tenant, fairness key) group, then due time.
    "jobs_fair": ("priority, tenant_id, fairness_key, scheduled_at, id", DUE_ONE_OFF),
    # ... and, in a group where some types or keys are held back, type by type: the held
    # types are skipped by a seek, not walked (a backlog of one type can be all of a group).
    "jobs_fair_type": (
        "priority, tenant_id, fairness_key, job_type, scheduled_at, id",
        DUE_ONE_OFF,
    ),
    "jobs_templates_due": ("scheduled_at, id", DUE_TEMPLATE),
    # The reaper's sweeps (find_stale).
    "jobs_queued": ("queued_at", JobQuery(tenant_id=None, statuses=QUEUED)),
    "jobs_in_flight": ("heartbeat_at", JobQuery(tenant_id=None, statuses=IN_FLIGHT)),
    # A tenant's cron templates (the Cron view), newest first.
    "jobs_tenant_templates": (
        "tenant_id, created_at DESC, id DESC",
        JobQuery(tenant_id=None, cron=True),
    ),
    # Templates holding a buffered fire time, by that time.
    "jobs_cron_buffered": ("cron_buffered", JobQuery(tenant_id=None, buffered=True)),
    # Workflow steps their workflow has not acted on yet, by age (the reaper's sweep).
    "jobs_step_dirty": ("updated_at", STEPS_TO_SETTLE),
}


def sync_partial_indexes(conn: sqlite3.Connection) -> None:
    """Create the partial indexes (after the column migration: some name added columns),
    as :func:`sync_index` does. Idempotent."""
    for name, (columns, query) in PARTIAL_INDEXES.items():
        sync_index(conn, name, columns, index_where(query))


def sync_index(conn: sqlite3.Connection, name: str, columns: str, where: str) -> None:
    """Create the partial index ``name`` of the jobs on ``columns`` WHERE ``where``, first
    dropping one stored under other columns or another WHERE (a file made by an older
    version, or before a predicate or an index's columns changed). Idempotent."""
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)
    ).fetchone()
    if row is not None and _stored_shape(row[0]) != (_collapsed(columns), _collapsed(where)):
        conn.execute(f"DROP INDEX {name}")
    conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON jobs ({columns}) WHERE {where}")


def _stored_shape(sql: str) -> tuple[str, str]:
    """The columns and the WHERE text of a stored ``CREATE INDEX ... ON jobs (<columns>)
    WHERE ...`` statement, whitespace collapsed."""
    parts = re.split(r"\sWHERE\s", sql, maxsplit=1)
    head = parts[0]
    columns = head[head.find("(") + 1 : head.rfind(")")]
    return _collapsed(columns), (_collapsed(parts[1]) if len(parts) == 2 else "")


def _collapsed(text: str) -> str:
    return " ".join(text.split())
