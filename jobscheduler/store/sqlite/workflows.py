"""The SQLite store's workflow records (their own table) and the reads of their steps.

The steps are rows of ``jobs``; the indexes that find them are here: a workflow's steps
and the children a step spawned, by whether each ended, and those children by age
(:data:`STEP_INDEXES`), and the steps marked for their workflow, by age
(``jobs_step_dirty``, a partial index whose WHERE comes from
:data:`~jobscheduler.store.workflows.STEPS_TO_SETTLE`, in :mod:`.where`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from jobscheduler.domain.attempts import decode_result
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import WorkflowChange, released
from jobscheduler.domain.workflows import (
    WORKFLOW_TIME_FIELDS,
    DeclaredStep,
    Workflow,
    WorkflowStatus,
)
from jobscheduler.errors import DuplicateWorkflow, StoreError, WorkflowNotFound
from jobscheduler.store.query import Cursor, JobQuery, Sort
from jobscheduler.store.workflows import STEPS_TO_SETTLE, TenantScope, WorkflowQuery

from .codec import _COLUMNS, _SELECT, _from_row, _millis, from_millis
from .codec import _to_db as job_value
from .conn import SQLiteConnection, first_row, key_holder, placeholders
from .query import keyset_sql
from .where import index_where, sync_index, where_clause

WORKFLOWS_SCHEMA = """
CREATE TABLE IF NOT EXISTS workflows (
    id                  TEXT PRIMARY KEY,
    tenant_id           TEXT NOT NULL,
    idempotency_key     TEXT NOT NULL,
    status              TEXT NOT NULL,
    steps               TEXT NOT NULL,
    version             INTEGER NOT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    finished_at         INTEGER,
    cancel_requested_at INTEGER,
    template_id         TEXT,
    fire_at             INTEGER,
    last_error          TEXT,
    step_count          INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS workflows_tenant_key ON workflows (tenant_id, idempotency_key);
CREATE INDEX IF NOT EXISTS workflows_tenant_created
    ON workflows (tenant_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS workflows_status_created
    ON workflows (status, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS workflows_finished ON workflows (status, finished_at, id)
    WHERE finished_at IS NOT NULL;
"""
#: The jobs' indexes of the steps' reads (name -> columns, WHERE). None holds the status,
#: which each move of a step changes: a workflow's steps and a spawner's children are found
#: by whether each ended (``finished_at``, see :func:`.where.finished_term`: only an end and
#: a retry move it), and a spawner's children read page by page by age
#: (``jobs_spawned_pages``, named by those reads: the planner would walk every job of the
#: status asked in the dashboard's ``jobs_status_created``).
STEP_INDEXES: Final[Mapping[str, tuple[str, str]]] = {
    "jobs_workflow": ("workflow_id, finished_at", "workflow_id IS NOT NULL"),
    "jobs_spawned": ("spawned_by, finished_at", "spawned_by IS NOT NULL"),
    "jobs_spawned_pages": ("spawned_by, created_at DESC, id DESC", "spawned_by IS NOT NULL"),
}

_FIELDS = (
    "id",
    "tenant_id",
    "idempotency_key",
    "status",
    "steps",
    "version",
    "created_at",
    "updated_at",
    "finished_at",
    "cancel_requested_at",
    "template_id",
    "fire_at",
    "last_error",
    "step_count",
)
_WF_READ = ", ".join(_FIELDS)
#: A read without ``steps``: an empty list in their place (a workflow may declare a thousand
#: steps: decoding them is costly), their number stored beside them.
_WF_READ_LEAN = ", ".join(("'[]'" if f == "steps" else f) for f in _FIELDS)


def migrate_workflows(conn: sqlite3.Connection) -> None:
    """Add ``step_count`` to a workflows table made before it was stored, counting the
    steps of the records already there; create the steps' indexes (rebuilt in a file whose
    indexes were keyed on the status)."""
    for name, (columns, where) in STEP_INDEXES.items():
        sync_index(conn, name, columns, where)
    present = {row[1] for row in conn.execute("PRAGMA table_info(workflows)")}
    if "step_count" not in present:
        conn.execute("ALTER TABLE workflows ADD COLUMN step_count INTEGER NOT NULL DEFAULT 0")
        conn.execute("UPDATE workflows SET step_count = json_array_length(steps)")


def _to_db(field: str, value: Any) -> Any:
    if value is None:
        return None
    if field in WORKFLOW_TIME_FIELDS:
        return _millis(value)
    if field == "status":
        return WorkflowStatus(value).value
    if field == "steps":
        return json.dumps([step.to_json() for step in value], separators=(",", ":"))
    return value


def _workflow(row: tuple[Any, ...]) -> Workflow:
    values = dict(zip(_FIELDS, row, strict=True))
    for field in WORKFLOW_TIME_FIELDS:
        if values[field] is not None:
            values[field] = from_millis(values[field])
    values["status"] = WorkflowStatus(values["status"])
    values["steps"] = tuple(DeclaredStep.from_json(s) for s in json.loads(values["steps"]))
    return Workflow(**values)


def _conditions(expect: Mapping[str, Any]) -> tuple[list[str], list[Any]]:
    terms: list[str] = []
    params: list[Any] = []
    for field, expected in expect.items():
        if isinstance(expected, tuple):
            terms.append(f"{field} IN ({placeholders(len(expected))})")
            params += [_to_db(field, v) for v in expected]
        elif expected is None:
            terms.append(f"{field} IS NULL")
        else:
            terms.append(f"{field} = ?")
            params.append(_to_db(field, expected))
    return terms, params


class SQLiteWorkflowsMixin(SQLiteConnection):
    """Workflow records and step reads (a mixin of the SQLite store)."""

    async def insert_workflow(self, workflow: Workflow) -> Workflow:
        params = [_to_db(field, getattr(workflow, field)) for field in _FIELDS]
        sql = f"INSERT INTO workflows ({_WF_READ}) VALUES ({placeholders(len(_FIELDS))})"

        def op(conn: sqlite3.Connection) -> Workflow:
            try:
                conn.execute(sql, params)
            except sqlite3.IntegrityError as exc:
                holder = key_holder(conn, "workflows", workflow.tenant_id, workflow.idempotency_key)
                if holder is None:
                    raise StoreError(f"insert of workflow {workflow.id} failed: {exc}") from exc
                raise DuplicateWorkflow(
                    f"idempotencyKey {workflow.idempotency_key!r} is already used by another "
                    "workflow",
                    existing_id=holder,
                ) from None
            return workflow

        return await self._write(op)

    async def get_workflow(
        self, workflow_id: str, *, tenant: str | None = None, steps: bool = True
    ) -> Workflow:
        sql = f"SELECT {_WF_READ if steps else _WF_READ_LEAN} FROM workflows WHERE id = ?"
        params: list[Any] = [workflow_id]
        if tenant is not None:
            sql += " AND tenant_id = ?"
            params.append(tenant)
        row = await self._read(lambda conn: conn.execute(sql, params).fetchone())
        if row is None:
            raise WorkflowNotFound(f"workflow {workflow_id} not found")
        return _workflow(row)

    async def find_workflows(
        self,
        query: WorkflowQuery,
        limit: int,
        after: Cursor | None = None,
        *,
        steps: bool = True,
    ) -> list[Workflow]:
        terms: list[str] = []
        params: list[Any] = []
        for column, value in (("tenant_id", query.tenant_id), ("template_id", query.template_id)):
            if value is not None:
                terms.append(f"{column} = ?")
                params.append(value)
        if query.statuses:
            terms.append(f"status IN ({placeholders(len(query.statuses))})")
            params += [s.value for s in query.statuses]
        if query.key_prefix is not None:
            terms.append("idempotency_key >= ? AND idempotency_key < ?")
            params += [query.key_prefix, query.key_prefix + "\U0010ffff"]
        if query.created_before is not None:
            terms.append("created_at < ?")
            params.append(_millis(query.created_before))
        sql, params = keyset_sql(
            _WF_READ if steps else _WF_READ_LEAN,
            "workflows",
            terms,
            params,
            Sort.CREATED_DESC,
            after,
            limit,
            _millis,
        )
        rows = await self._read(lambda conn: conn.execute(sql, params).fetchall())
        return [_workflow(row) for row in rows]

    async def apply_workflow(self, change: WorkflowChange) -> Workflow | None:
        assignments = ", ".join(f"{field} = ?" for field in change.set)
        params = [_to_db(field, value) for field, value in change.set.items()]
        terms, expected = _conditions(change.expect)
        sql = (
            f"UPDATE workflows SET {assignments} WHERE {' AND '.join(['id = ?', *terms])} "
            f"RETURNING {_WF_READ}"
        )
        params += [change.workflow_id, *expected]

        return await self._write(lambda conn: first_row(conn, sql, params, _workflow))

    async def workflow_steps(self, workflow_id: str, *, tenant: str | None = None) -> list[Job]:
        where, params = where_clause(JobQuery(tenant_id=tenant, workflow_id=workflow_id), _millis)
        sql = f"SELECT {_SELECT} FROM jobs {where} ORDER BY created_at, id"
        rows = await self._read(lambda conn: conn.execute(sql, params).fetchall())
        return [_from_row(row) for row in rows]

    async def any_job(self, query: JobQuery) -> bool:
        where, params = where_clause(query, _millis)
        sql = f"SELECT 1 FROM jobs {where} LIMIT 1"
        return bool(await self._read(lambda conn: conn.execute(sql, params).fetchone()))

    async def spawned_results(self, spawner: str) -> dict[str, Any]:
        completed = JobQuery(tenant_id=None, spawned_by=spawner, statuses=(Status.COMPLETED,))
        where, params = where_clause(completed, _millis)
        sql = (
            f"SELECT json_extract(step, '$.name'), result FROM jobs INDEXED BY jobs_spawned {where}"
        )
        rows = await self._read(lambda conn: conn.execute(sql, params).fetchall())
        return {name: decode_result(result) for name, result in rows}

    async def release_spawned(self, spawner: str, now: datetime, limit: int) -> int:
        fields = released(now)
        assignments = ", ".join(f"{_COLUMNS[field]} = ?" for field in fields)
        waiting = JobQuery(tenant_id=None, spawned_by=spawner, statuses=(Status.WAITING,))
        where, where_params = where_clause(waiting, _millis)
        sql = (
            f"UPDATE jobs SET {assignments}, scheduled_at = MAX(scheduled_at, ?) "
            f"WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_spawned {where} LIMIT ?)"
        )
        params = [job_value(field, value) for field, value in fields.items()]
        params += [_millis(now), *where_params, limit]
        return int(await self._write(lambda conn: conn.execute(sql, params).rowcount))

    async def clear_marks(self, steps: Sequence[Job]) -> int:
        # settle_step of each as one executemany: the hot path of a fan-out's ends, whose
        # marks are cleared a few hundred at a time.
        sql = (
            "UPDATE jobs SET step_dirty = 0 "
            "WHERE id = ? AND status = ? AND updated_at = ? AND step_dirty = 1"
        )
        params = [(s.id, s.status.value, _millis(s.updated_at)) for s in steps]
        if not params:
            return 0
        return int(await self._write(lambda conn: conn.executemany(sql, params).rowcount))

    async def steps_to_settle(self, before: datetime, limit: int) -> list[Job]:
        sql = (
            f"SELECT {_SELECT} FROM jobs INDEXED BY jobs_step_dirty "
            f"WHERE {index_where(STEPS_TO_SETTLE)} AND updated_at < ? "
            "ORDER BY updated_at, id LIMIT ?"
        )
        params = (_millis(before), limit)
        rows = await self._read(lambda conn: conn.execute(sql, params).fetchall())
        return [_from_row(row) for row in rows]

    async def expired_workflows(
        self, status: WorkflowStatus, before: datetime, limit: int, scope: TenantScope
    ) -> list[Workflow]:
        terms = ["status = ?", "finished_at IS NOT NULL", "finished_at < ?"]
        params: list[Any] = [status.value, _millis(before)]
        if scope.tenant is not None:
            terms.append("tenant_id = ?")
            params.append(scope.tenant)
        if scope.skip_tenants:
            terms.append(f"tenant_id NOT IN ({placeholders(len(scope.skip_tenants))})")
            params += scope.skip_tenants
        sql = (
            f"SELECT {_WF_READ_LEAN} FROM workflows INDEXED BY workflows_finished "
            f"WHERE {' AND '.join(terms)} ORDER BY finished_at, id LIMIT ?"
        )
        params.append(limit)
        rows = await self._read(lambda conn: conn.execute(sql, params).fetchall())
        return [_workflow(row) for row in rows]

    async def delete_workflow_record(self, workflow: Workflow) -> bool:
        finished = None if workflow.finished_at is None else _millis(workflow.finished_at)
        params = (workflow.id, workflow.status.value, finished)

        def op(conn: sqlite3.Connection) -> bool:
            sql = "DELETE FROM workflows WHERE id = ? AND status = ? AND finished_at IS ?"
            if conn.execute(sql, params).rowcount:
                return True
            kept = conn.execute("SELECT 1 FROM workflows WHERE id = ?", (workflow.id,))
            return kept.fetchone() is None

        return await self._write(op)
