"""Stores created before tenancy: idempotency keys become unique per tenant at start."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jobscheduler.errors import DuplicateJob

from .conftest import file_altered, make_job, started_sqlite

#: The jobs table as releases before tenancy created it (keys unique across tenants).
OLD_JOBS_TABLE = """
CREATE TABLE jobs (
    id              TEXT PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    tenant_id       TEXT NOT NULL,
    job_type        TEXT NOT NULL,
    payload         TEXT NOT NULL,
    priority        INTEGER NOT NULL,
    status          TEXT NOT NULL,
    scheduled_at    INTEGER NOT NULL,
    cron            TEXT,
    attempts        INTEGER NOT NULL,
    max_attempts    INTEGER NOT NULL,
    last_error      TEXT,
    claimed_by      TEXT,
    claimed_at      INTEGER,
    claim_token     TEXT,
    heartbeat_at    INTEGER,
    queued_at       INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO jobs VALUES ('65f0c0ffee0123456789abcd', 'shared', 'acme', 'noop', '{}', 0,
    'pending', 0, NULL, 0, 3, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0);
"""


async def test_an_old_sqlite_file_gets_per_tenant_keys_and_keeps_its_jobs(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_JOBS_TABLE)
    store = await started_sqlite(path)
    try:
        kept = await store.get("65f0c0ffee0123456789abcd")
        assert (kept.idempotency_key, kept.tenant_id) == ("shared", "acme")
        await store.insert(make_job(key="shared", tenant="other"))
        with pytest.raises(DuplicateJob):
            await store.insert(make_job(key="shared", tenant="acme"))
    finally:
        await store.close()
    # A second start finds nothing left to migrate.
    again = await started_sqlite(path)
    try:
        assert len(await again.list_jobs("other", None, 10)) == 1
    finally:
        await again.close()


async def test_a_file_with_the_full_run_index_gets_the_partial_one(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    await file_altered(
        path, "DROP INDEX jobs_run; CREATE UNIQUE INDEX jobs_run ON jobs (template_id, fire_at);"
    )

    store = await started_sqlite(path)
    try:
        conn = sqlite3.connect(path)
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'jobs_run'").fetchone()
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM jobs WHERE template_id = ? AND fire_at = ?",
            ("t", 1),
        ).fetchall()
        conn.close()
        assert sql.endswith("WHERE template_id IS NOT NULL")
        assert "INDEX jobs_run" in plan[0][3], plan
    finally:
        await store.close()
