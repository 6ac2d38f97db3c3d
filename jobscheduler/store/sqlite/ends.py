"""The SQLite store's counters of jobs that ended (see :mod:`jobscheduler.store.ends`).

``job_ends`` holds one row per (tenant, step, status), added to by triggers on the jobs
table in the statement's own transaction, as ``job_counts`` is. A file made before them
gets the last :data:`~jobscheduler.store.ends.KEPT` of ends counted once, from the jobs,
when the table is made.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Final

from jobscheduler.store.ends import KEPT, STEP_MS
from jobscheduler.store.query import THROUGHPUT

from .where import status_condition

_ENDS = status_condition(THROUGHPUT)  # "status IN (...)"
_NEW_ENDS = f"NEW.{_ENDS}"
_ADD = f"""INSERT INTO job_ends VALUES (NEW.tenant_id, NEW.updated_at / {STEP_MS}, NEW.status, 1)
        ON CONFLICT DO UPDATE SET n = n + 1;"""

#: The counters and their triggers: an insert of a job that has ended, and a change of
#: status to an end, add one to the step of the job's ``updated_at``.
ENDS_SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS job_ends (
    tenant_id TEXT NOT NULL,
    step      INTEGER NOT NULL,
    status    TEXT NOT NULL,
    n         INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, step, status)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS job_ends_step ON job_ends (step);
CREATE TRIGGER IF NOT EXISTS job_ends_insert AFTER INSERT ON jobs
    WHEN {_NEW_ENDS} BEGIN
    {_ADD}
END;
CREATE TRIGGER IF NOT EXISTS job_ends_update AFTER UPDATE OF status ON jobs
    WHEN OLD.status IS NOT NEW.status AND {_NEW_ENDS} BEGIN
    {_ADD}
END;
"""

_RECOUNT: Final = (
    f"INSERT INTO job_ends SELECT tenant_id, updated_at / {STEP_MS}, status, COUNT(*) "
    f"FROM jobs WHERE {_ENDS} AND updated_at >= ? GROUP BY 1, 2, 3"
)


#: The indexes the throughput figures read before the counters (every end wrote to them).
RETIRED_INDEXES: Final = ("jobs_finished", "jobs_tenant_finished")


def count_recent_ends(conn: sqlite3.Connection) -> None:
    """Count the ends of the last KEPT from the jobs, then drop the indexes that counted
    them before (in the caller's transaction): once, when the counters are new."""
    since = int(time.time() * 1000) - int(KEPT.total_seconds() * 1000)
    conn.execute(_RECOUNT, (since,))
    for name in RETIRED_INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {name}")


def ends_sql(tenant_id: str | None, first_step: int) -> tuple[str, list[Any]]:
    """The counters from ``first_step`` on, summed over tenants when ``tenant_id`` is None:
    rows of (status, step, n)."""
    if tenant_id is None:
        sql = "SELECT status, step, SUM(n) FROM job_ends WHERE step >= ? GROUP BY step, status"
        return sql, [first_step]
    sql = "SELECT status, step, n FROM job_ends WHERE tenant_id = ? AND step >= ?"
    return sql, [tenant_id, first_step]


FORGET_ENDS: Final = "DELETE FROM job_ends WHERE step < ?"

__all__ = ["ENDS_SCHEMA", "FORGET_ENDS", "count_recent_ends", "ends_sql"]
