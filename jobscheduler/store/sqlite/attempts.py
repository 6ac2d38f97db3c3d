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

from .codec import from_millis, from_nullable_millis, to_millis, to_nullable_millis
from .conn import SQLiteConnection, in_lists, placeholders

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

ATTEMPT_COLUMNS = (
    "job_id",
    "number",
    "outcome",
    "worker",
    "started_at",
    "finished_at",
    "error_type",
    "error_message",
    "traceback",
    "run",
)
INSERT_ATTEMPT = (
    f"INSERT OR IGNORE INTO attempts ({', '.join(ATTEMPT_COLUMNS)}) "
    f"VALUES ({placeholders(len(ATTEMPT_COLUMNS))})"
)


def attempt_params(record: Attempt) -> tuple[Any, ...]:
    return (
        record.job_id,
        record.number,
        record.outcome.value,
        record.worker,
        to_nullable_millis(record.started_at),
        to_millis(record.finished_at),
        record.error_type,
        record.error_message,
        record.traceback,
        record.run,
    )


def attempt_from_row(row: Sequence[Any]) -> Attempt:
    return Attempt(
        job_id=row[0],
        run=row[9],
        number=row[1],
        outcome=Outcome(row[2]),
        worker=row[3],
        started_at=from_nullable_millis(row[4]),
        finished_at=from_millis(row[5]),
        error_type=row[6],
        error_message=row[7],
        traceback=row[8],
    )


def migrate_attempt_runs(conn: sqlite3.Connection) -> None:
    """Rebuild an attempts table of a file from before runs were numbered (its key was
    (job, number, outcome)): every record it holds is of run 0. Idempotent."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(attempts)")}
    if "run" in columns:
        return
    kept = ", ".join(column for column in ATTEMPT_COLUMNS if column != "run")
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
            f"SELECT {', '.join(ATTEMPT_COLUMNS)} FROM attempts WHERE job_id = ? {mine}"
            "ORDER BY run ASC, number ASC, finished_at ASC"
        )
        return await self._read(
            lambda conn: [attempt_from_row(r) for r in conn.execute(sql, params)]
        )

    async def attempts_of(self, job_ids: Sequence[str]) -> dict[str, list[Attempt]]:
        def op(conn: sqlite3.Connection) -> dict[str, list[Attempt]]:
            found: dict[str, list[Attempt]] = {}
            for ids, marks in in_lists(job_ids):
                sql = (
                    f"SELECT {', '.join(ATTEMPT_COLUMNS)} FROM attempts WHERE job_id IN {marks} "
                    "ORDER BY job_id, run ASC, number ASC, finished_at ASC"
                )
                for row in conn.execute(sql, list(ids)):
                    record = attempt_from_row(row)
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
