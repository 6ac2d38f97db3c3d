"""The embedded JobStore: one SQLite file in WAL mode, stdlib ``sqlite3`` in trio threads.

This module holds the schema's set-up and the jobs' records (insert, get); their claims and
transitions are :mod:`~jobscheduler.store.sqlite.transitions`.
The connections and the group commit are :mod:`~jobscheduler.store.sqlite.conn`; the row
codec is :mod:`~jobscheduler.store.sqlite.codec`; the attempt records
:mod:`~jobscheduler.store.sqlite.attempts`, the cron ledger
:mod:`~jobscheduler.store.sqlite.ledger`, listing and stats
:mod:`~jobscheduler.store.sqlite.query`, keys and audit
:mod:`~jobscheduler.store.sqlite.tenancy`, presence and the Overview
:mod:`~jobscheduler.store.sqlite.workers`, workflow records
:mod:`~jobscheduler.store.sqlite.workflows`, counters and pruning
:mod:`~jobscheduler.store.sqlite.upkeep`, flow control :mod:`~jobscheduler.store.sqlite.flow`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobscheduler.domain.audit import AuditRecord
from jobscheduler.domain.model import Job
from jobscheduler.errors import StoreError
from jobscheduler.store.base import InsertOutcome, JobStore
from jobscheduler.store.inserts import duplicate_of, first_of_each_key, spread_outcomes
from jobscheduler.store.jobs import found

from . import ledger as sqlite_ledger
from .attempts import ATTEMPTS_SCHEMA, SQLiteAttemptsMixin, migrate_attempt_runs
from .codec import _COLUMNS, _SCHEMA, _SELECT, _from_row, _migrate, _millis, _to_db
from .conn import SQLiteConnection, first_row, in_lists, key_holder, placeholders
from .flow import FLOW_SCHEMA, SQLiteFlowMixin
from .ledger import SQLiteLedgerMixin
from .notifications import NOTIFICATIONS_SCHEMA, SQLiteNotificationsMixin
from .query import MANAGE_INDEXES, SQLiteQueryMixin
from .tenancy import (
    INSERT_AUDIT,
    TENANCY_SCHEMA,
    SQLiteTenancyMixin,
    audit_params,
    migrate_run_index,
    migrate_tenant_keys,
)
from .transitions import SQLiteTransitionsMixin
from .upkeep import SQLiteUpkeepMixin, make_incremental, prepare_counts
from .where import sync_partial_indexes
from .workers import WORKERS_SCHEMA, SQLiteWorkersMixin, migrate_workers
from .workflows import WORKFLOWS_SCHEMA, SQLiteWorkflowsMixin, migrate_workflows

#: The INSERT of a job's row; its parameters are :func:`_job_row`'s.
_INSERT_JOB = f"INSERT INTO jobs ({_SELECT}) VALUES ({placeholders(len(_COLUMNS))})"


def _job_row(job: Job) -> list[Any]:
    """The parameters of :data:`_INSERT_JOB` for ``job``."""
    return [_to_db(field, getattr(job, field)) for field in _COLUMNS]


class SQLiteJobStore(
    SQLiteTransitionsMixin,
    SQLiteWorkflowsMixin,
    SQLiteFlowMixin,
    SQLiteNotificationsMixin,
    SQLiteWorkersMixin,
    SQLiteQueryMixin,
    SQLiteTenancyMixin,
    SQLiteLedgerMixin,
    SQLiteAttemptsMixin,
    SQLiteUpkeepMixin,
    SQLiteConnection,
    JobStore,
):
    """JobStore on one SQLite file (created with its directory if missing)."""

    # ------------------------------------------------------------------ schema

    @staticmethod
    def _prepare(conn: sqlite3.Connection) -> None:
        make_incremental(conn)
        conn.executescript(_SCHEMA + ATTEMPTS_SCHEMA)
        migrate_attempt_runs(conn)
        _migrate(conn)
        if migrate_tenant_keys(conn):
            conn.executescript(_SCHEMA)  # the rebuilt table's indexes
        migrate_run_index(conn)
        conn.executescript(TENANCY_SCHEMA)
        sqlite_ledger.migrate(conn)
        conn.executescript(MANAGE_INDEXES)
        conn.executescript(WORKFLOWS_SCHEMA)
        migrate_workflows(conn)
        sync_partial_indexes(conn)
        conn.executescript(WORKERS_SCHEMA)
        migrate_workers(conn)
        conn.executescript(FLOW_SCHEMA)
        prepare_counts(conn)
        conn.executescript(NOTIFICATIONS_SCHEMA)

    # ------------------------------------------------------------------ JobStore

    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        params = _job_row(job)

        def op(conn: sqlite3.Connection) -> Job:
            try:
                conn.execute(_INSERT_JOB, params)
            except sqlite3.IntegrityError as exc:
                if "idempotency_key" in str(exc) or "template_id" in str(exc):
                    # No holder: the run's slot (template, fire time) was taken under another key.
                    holder = key_holder(conn, "jobs", job.tenant_id, job.idempotency_key)
                    raise duplicate_of(job, holder) from None
                raise StoreError(f"insert failed: {exc}") from exc
            if audit is not None:
                conn.execute(INSERT_AUDIT, audit_params(audit))
            return job

        return await self._write(op)

    async def insert_many(self, jobs: Sequence[Job]) -> list[InsertOutcome]:
        """One transaction (one group commit): one ``executemany`` of ``INSERT ... ON
        CONFLICT DO NOTHING``; only if some row was not inserted, a query for which (by id)
        and one for the holders of the keys that were taken."""
        if not jobs:
            return []
        unique, later = first_of_each_key(jobs)
        sql = f"{_INSERT_JOB} ON CONFLICT DO NOTHING"
        rows = [_job_row(job) for job in unique]

        def op(conn: sqlite3.Connection) -> list[InsertOutcome]:
            taken: list[int] = []
            if conn.executemany(sql, rows).rowcount < len(rows):
                taken = self._not_inserted(conn, unique)
            # Keys are unique per tenant: the holder of a taken key is looked up in its tenant.
            holders: dict[tuple[str, str], str] = {}
            keys = [unique[i].idempotency_key for i in taken]
            for chunk, marks in in_lists(keys):
                for tenant, key, holder in conn.execute(
                    "SELECT tenant_id, idempotency_key, id FROM jobs "
                    f"WHERE idempotency_key IN {marks}",
                    chunk,
                ):
                    holders[(tenant, key)] = holder
            stored: list[InsertOutcome] = list(unique)
            for i in taken:
                job = unique[i]
                stored[i] = duplicate_of(job, holders.get((job.tenant_id, job.idempotency_key)))
            return stored

        return spread_outcomes(jobs, await self._write(op), later)

    @staticmethod
    def _not_inserted(conn: sqlite3.Connection, jobs: Sequence[Job]) -> list[int]:
        """The positions of the ``jobs`` whose row was not inserted: the stored row with
        their id is missing (or, never in practice, another job's)."""
        stored: dict[str, tuple[str, str]] = {}
        ids = [job.id for job in jobs]
        for chunk, marks in in_lists(ids):
            for job_id, tenant, key in conn.execute(
                f"SELECT id, tenant_id, idempotency_key FROM jobs WHERE id IN {marks}", chunk
            ):
                stored[job_id] = (tenant, key)
        return [
            i
            for i, job in enumerate(jobs)
            if stored.get(job.id) != (job.tenant_id, job.idempotency_key)
        ]

    async def get(self, job_id: str, *, tenant: str | None = None) -> Job:
        return found(await self._one(["id = ?"], [job_id], tenant), job_id)

    async def find_run(
        self, template_id: str, fire_at: datetime, *, tenant: str | None = None
    ) -> Job | None:
        terms, params = ["template_id = ?", "fire_at = ?"], [template_id, _millis(fire_at)]
        return await self._one(terms, params, tenant)

    async def _one(self, terms: list[str], params: list[Any], tenant: str | None) -> Job | None:
        """The job matching every term (and of ``tenant``, when given), or None."""
        if tenant is not None:
            terms, params = [*terms, "tenant_id = ?"], [*params, tenant]
        sql = f"SELECT {_SELECT} FROM jobs WHERE {' AND '.join(terms)}"
        return await self._read(lambda conn: first_row(conn, sql, params, _from_row))
