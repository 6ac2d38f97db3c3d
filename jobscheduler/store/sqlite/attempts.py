"""The SQLite store's attempt records: their table (beside ``jobs``), row codec and reads.

The records are written by the store's transitions (:mod:`~jobscheduler.store.sqlite.store`),
in the transition's transaction; :class:`SQLiteAttemptsMixin` reads and prunes them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobscheduler.domain.attempts import Attempt, Outcome

from .codec import to_millis
from .conn import SQLiteConnection, in_lists
from .rows import Column, Rows, enum_column, millis_column

#: One row per (job, run, attempt number, outcome); ``INSERT OR IGNORE`` keeps the first.
ATTEMPTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    job_id          TEXT NOT NULL,
    number          INTEGER NOT NULL,
    outcome         TEXT NOT NULL,
    worker          TEXT,
    started_at      INTEGER,
    finished_at     INTEGER NOT NULL,
    error_type      TEXT,
    error_message   TEXT,
    traceback       TEXT,
    run             INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, run, number, outcome)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS attempts_finished ON attempts (finished_at);
"""

ATTEMPTS = Rows(
    Attempt,
    Column("job_id"),
    Column("number"),
    enum_column("outcome", Outcome),
    Column("worker"),
    millis_column("started_at", nullable=True),
    millis_column("finished_at"),
    Column("error_type"),
    Column("error_message"),
    Column("traceback"),
    Column("run"),
)
INSERT_ATTEMPT = ATTEMPTS.insert("attempts", "INSERT OR IGNORE")
#: The parameters of :data:`INSERT_ATTEMPT` for a record.
attempt_params = ATTEMPTS.params


def migrate_attempt_runs(conn: sqlite3.Connection) -> None:
    """Rebuild an attempts table of a file from before runs were numbered (its key was
    (job, number, outcome)): every record it holds is of run 0. Idempotent."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(attempts)")}
    if "run" in columns:
        return
    kept = ", ".join(column for column in ATTEMPTS.names if column != "run")
    conn.executescript(
        "BEGIN IMMEDIATE;"
        "DROP INDEX IF EXISTS attempts_finished;"
        "ALTER TABLE attempts RENAME TO attempts_before_runs;"
        f"{ATTEMPTS_SCHEMA}"
        f"INSERT INTO attempts ({kept}, run) SELECT {kept}, 0 FROM attempts_before_runs;"
        "DROP TABLE attempts_before_runs;"
        "COMMIT;"
    )


class SQLiteAttemptsMixin(SQLiteConnection):
    """The attempt records' reads and their retention."""

    async def attempts(self, job_id: str, *, tenant: str | None = None) -> list[Attempt]:
        params: list[Any] = [job_id]
        mine = ""
        if tenant is not None:  # the records of a job of this tenant only
            mine = "AND job_id IN (SELECT id FROM jobs WHERE id = ? AND tenant_id = ?) "
            params += [job_id, tenant]
        sql = (
            f"SELECT {ATTEMPTS.select} FROM attempts WHERE job_id = ? {mine}"
            "ORDER BY run ASC, number ASC, finished_at ASC"
        )
        return await self._read(lambda conn: [ATTEMPTS.load(r) for r in conn.execute(sql, params)])

    async def attempts_of(self, job_ids: Sequence[str]) -> dict[str, list[Attempt]]:
        def op(conn: sqlite3.Connection) -> dict[str, list[Attempt]]:
            found: dict[str, list[Attempt]] = {}
            for ids, marks in in_lists(job_ids):
                sql = (
                    f"SELECT {ATTEMPTS.select} FROM attempts WHERE job_id IN {marks} "
                    "ORDER BY job_id, run ASC, number ASC, finished_at ASC"
                )
                for row in conn.execute(sql, list(ids)):
                    record = ATTEMPTS.load(row)
                    found.setdefault(record.job_id, []).append(record)
            return found

        return await self._read(op)

    async def record_attempts(self, records: Sequence[Attempt]) -> None:
        if not records:
            return
        params = [attempt_params(record) for record in records]
        await self._write(lambda conn: conn.executemany(INSERT_ATTEMPT, params))

    async def prune_attempts(self, before: datetime) -> int:
        cutoff = to_millis(before)
        return await self._write(
            lambda conn: (
                conn.execute("DELETE FROM attempts WHERE finished_at < ?", (cutoff,)).rowcount
            )
        )
