"""The SQLite file of an older version (no ``cron_policy`` column) opens and keeps working:
its templates read as the defaults, and new templates store their settings."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import attrs

from jobscheduler.domain.cron import CronPolicy
from jobscheduler.domain.model import cron_policy_of, job_to_json
from jobscheduler.store.jobs import OccurrenceQuery
from jobscheduler.store.sqlite.store import _SCHEMA

from .conftest import BASE, make_job, started_sqlite

# The jobs table as it was before cron policies: every column from cron_policy on removed.
OLD_SCHEMA = re.sub(r",\n    cron_policy[^)]*\n\)", "\n)", _SCHEMA)


async def test_a_file_from_before_cron_policies_is_migrated_on_start(tmp_path: Path) -> None:
    assert "cron_policy" not in OLD_SCHEMA
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_SCHEMA)
        conn.execute(
            "INSERT INTO jobs (id, idempotency_key, tenant_id, job_type, payload, priority, "
            "status, scheduled_at, cron, attempts, max_attempts, created_at, updated_at) "
            "VALUES ('6b0d2ee639c1219066d05a0c', 'old', 't', 'noop', '{}', 0, 'pending', "
            "1767225600000, '0 * * * *', 0, 3, 1767225600000, 1767225600000)"
        )
    conn.close()
    store = await started_sqlite(path)
    try:
        old = await store.get("6b0d2ee639c1219066d05a0c")
        assert old.cron_policy is None
        assert cron_policy_of(old) == CronPolicy()
        assert job_to_json(old)["timezone"] == "UTC"
        # It gained the buffered-fire-time column (and its index) and the ledger table.
        assert old.cron_buffered is None
        assert await store.buffered_templates(10) == []
        assert await store.occurrences(OccurrenceQuery(old.id), limit=10) == []
        policy = CronPolicy(timezone="Asia/Kolkata")
        new = attrs.evolve(
            make_job(key="new", cron="0 * * * *", scheduled_at=BASE), cron_policy=policy
        )
        await store.insert(new)
        assert (await store.get(new.id)).cron_policy == policy
    finally:
        await store.close()
    # Starting again on the migrated file is a no-op.
    again = await started_sqlite(path)
    await again.close()
