"""The SQLite store's attempt records: their table (beside ``jobs``) and row codec."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..attempts import Attempt, Outcome

#: One row per (job, attempt number, outcome); ``INSERT OR IGNORE`` keeps the first.
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
    PRIMARY KEY (job_id, number, outcome)
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
)
INSERT_ATTEMPT = (
    f"INSERT OR IGNORE INTO attempts ({', '.join(ATTEMPT_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(ATTEMPT_COLUMNS))})"
)


def millis(value: datetime | None) -> int | None:
    return None if value is None else round(value.timestamp() * 1000)


def from_millis(value: int | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value / 1000, UTC)


def attempt_params(record: Attempt) -> tuple[Any, ...]:
    return (
        record.job_id,
        record.number,
        record.outcome.value,
        record.worker,
        millis(record.started_at),
        millis(record.finished_at),
        record.error_type,
        record.error_message,
        record.traceback,
    )


def attempt_from_row(row: Sequence[Any]) -> Attempt:
    finished = from_millis(row[5])
    assert finished is not None
    return Attempt(
        job_id=row[0],
        number=row[1],
        outcome=Outcome(row[2]),
        worker=row[3],
        started_at=from_millis(row[4]),
        finished_at=finished,
        error_type=row[6],
        error_message=row[7],
        traceback=row[8],
    )
