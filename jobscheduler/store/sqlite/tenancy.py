"""The SQLite tables of tenancy: API keys and the audit trail.

A mixin of :class:`~jobscheduler.store.sqlite.store.SQLiteJobStore`, on the ``_read``/``_write``
of :class:`~jobscheduler.store.sqlite.conn.SQLiteConnection`; the tables are created with
the jobs schema at ``start``.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime

from jobscheduler.domain.audit import AuditQuery, AuditRecord
from jobscheduler.domain.keys import ApiKey, Role

from .codec import to_millis, to_nullable_millis
from .conn import SQLiteConnection, first_row
from .rows import Column, Rows, enum_column, millis_column
from .where import given

TENANCY_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id          TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    tenant_id   TEXT,
    role        TEXT NOT NULL,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit (
    id        TEXT PRIMARY KEY,
    at        INTEGER NOT NULL,
    key_id    TEXT,
    tenant_id TEXT,
    action    TEXT NOT NULL,
    job_id    TEXT,
    status    INTEGER NOT NULL,
    detail    TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS audit_at ON audit (at);
-- A cron run's identity: one job per (template, fire time), whatever its key. Partial: a
-- job that is not a run has no entry (nothing to collide with), so a one-off create skips it.
CREATE UNIQUE INDEX IF NOT EXISTS jobs_run ON jobs (template_id, fire_at)
    WHERE template_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS audit_tenant ON audit (tenant_id, id);
"""

_GLOBAL_KEY = re.compile(r"(idempotency_key\s+TEXT\s+NOT\s+NULL)\s+UNIQUE", re.IGNORECASE)


def migrate_tenant_keys(conn: sqlite3.Connection) -> bool:
    """Make idempotency keys unique per tenant in a file created when they were unique
    globally (a ``UNIQUE`` column constraint, which SQLite cannot drop): rebuild the jobs
    table without it, in one transaction. Returns True if it rebuilt (the caller then
    recreates the indexes). Idempotent."""
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type='table' AND name='jobs'"
    ).fetchone()
    if row is None or _GLOBAL_KEY.search(row[0]) is None:
        return False
    create = _GLOBAL_KEY.sub(r"\1", row[0]).replace("CREATE TABLE jobs", "CREATE TABLE jobs_new", 1)
    columns = ", ".join(r[1] for r in conn.execute("PRAGMA table_info(jobs)"))
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(create)
        conn.execute(f"INSERT INTO jobs_new ({columns}) SELECT {columns} FROM jobs")
        conn.execute("DROP TABLE jobs")
        conn.execute("ALTER TABLE jobs_new RENAME TO jobs")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True


def migrate_run_index(conn: sqlite3.Connection) -> None:
    """Drop ``jobs_run`` if a file made by an older version has it over every job, so that
    :data:`TENANCY_SCHEMA` recreates it partial. Idempotent."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type='index' AND name='jobs_run'")
    found = row.fetchone()
    if found is not None and "WHERE" not in found[0].upper():
        conn.execute("DROP INDEX jobs_run")


_KEYS = Rows(
    ApiKey,
    Column("id"),
    Column("secret_hash"),
    Column("tenant_id", "tenant"),
    enum_column("role", Role),
    Column("name"),
    millis_column("created_at"),
    millis_column("revoked_at", nullable=True),
)
_AUDIT = Rows(
    AuditRecord,
    Column("id"),
    millis_column("at"),
    Column("key_id"),
    Column("tenant_id", "tenant"),
    Column("action"),
    Column("job_id"),
    Column("status"),
    Column("detail"),
)
INSERT_AUDIT = _AUDIT.insert("audit")
#: The parameters of :data:`INSERT_AUDIT` for a record.
audit_params = _AUDIT.params


class SQLiteTenancyMixin(SQLiteConnection):
    """Keys and audit records on the store's SQLite file."""

    async def insert_key(self, key: ApiKey) -> ApiKey:
        await self._insert_new(_KEYS.insert("api_keys"), _KEYS.params(key), "key")
        return key

    async def get_key(self, key_id: str, *, tenant: str | None = None) -> ApiKey | None:
        mine = "" if tenant is None else " AND tenant_id = ?"
        sql = f"SELECT {_KEYS.select} FROM api_keys WHERE id = ?{mine}"
        params = (key_id,) if tenant is None else (key_id, tenant)
        return await self._read(lambda conn: first_row(conn, sql, params, _KEYS.load))

    async def list_keys(self, tenant_id: str | None) -> list[ApiKey]:
        if tenant_id is None:
            sql, params = f"SELECT {_KEYS.select} FROM api_keys ORDER BY created_at, id", ()
        else:
            sql = f"SELECT {_KEYS.select} FROM api_keys WHERE tenant_id = ? ORDER BY created_at, id"
            params = (tenant_id,)  # type: ignore[assignment]
        return await self._read(lambda conn: [_KEYS.load(r) for r in conn.execute(sql, params)])

    async def revoke_key(self, key_id: str, now: datetime) -> ApiKey | None:
        def op(conn: sqlite3.Connection) -> ApiKey | None:
            conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (to_millis(now), key_id),
            )
            sql = f"SELECT {_KEYS.select} FROM api_keys WHERE id = ?"
            return first_row(conn, sql, (key_id,), _KEYS.load)

        return await self._write(op)

    async def append_audit(self, record: AuditRecord) -> None:
        params = _AUDIT.params(record)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(INSERT_AUDIT, params)

        await self._write(op)

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        conditions, params = given(
            [
                ("tenant_id = ?", query.tenant),
                ("key_id = ?", query.key_id),
                ("action = ?", query.action),
                ("job_id = ?", query.job_id),
                ("at >= ?", to_nullable_millis(query.since)),
                ("at < ?", to_nullable_millis(query.until)),
                ("id < ?", query.before),
            ]
        )
        where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        sql = f"SELECT {_AUDIT.select} FROM audit {where} ORDER BY id DESC LIMIT ?"
        params.append(query.limit)
        return await self._read(lambda conn: [_AUDIT.load(r) for r in conn.execute(sql, params)])

    async def prune_audit(self, before: datetime, limit: int) -> int:
        sql = "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < ? LIMIT ?)"

        def op(conn: sqlite3.Connection) -> int:
            return conn.execute(sql, (to_millis(before), limit)).rowcount

        return await self._write(op)
