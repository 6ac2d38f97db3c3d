"""The SQLite store's row codec: the jobs table, its columns, and Job <-> row conversion.

Pure functions and constants (no connection is opened here), shared by the store's
modules: :mod:`~jobscheduler.store.sqlite.store` (jobs, claims, transitions) and
:mod:`~jobscheduler.store.sqlite.query` (listing, stats) and the other seams.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from jobscheduler.domain.cron import CronPolicy
from jobscheduler.domain.model import JOB_TIME_FIELDS, Job, Replay, Status
from jobscheduler.domain.states import FINAL
from jobscheduler.domain.steps import Step

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Job field -> column. Times are integer milliseconds since the epoch (UTC).
_COLUMNS: dict[str, str] = {
    "id": "id",
    "idempotency_key": "idempotency_key",
    "tenant_id": "tenant_id",
    "job_type": "job_type",
    "payload": "payload",
    "priority": "priority",
    "status": "status",
    "scheduled_at": "scheduled_at",
    "cron": "cron",
    "attempts": "attempts",
    "max_attempts": "max_attempts",
    "last_error": "last_error",
    "claimed_by": "claimed_by",
    "claimed_at": "claimed_at",
    "claim_token": "claim_token",
    "heartbeat_at": "heartbeat_at",
    "queued_at": "queued_at",
    "created_at": "created_at",
    "updated_at": "updated_at",
    "cron_policy": "cron_policy",
    "cron_buffered": "cron_buffered",
    "result": "result",
    "template_id": "template_id",
    "fire_at": "fire_at",
    "cancel_requested_at": "cancel_requested_at",
    "replays": "replays",
    "managed_by": "managed_by",
    "workflow_id": "workflow_id",
    "step": "step",
    "spawned_by": "spawned_by",
    "step_dirty": "step_dirty",
    "fairness_key": "fairness_key",
    "concurrency_key": "concurrency_key",
    "key_slot": "key_slot",
    "type_slot": "type_slot",
    "finished_at": "finished_at",
    "trace_parent": "trace_parent",
}
_SELECT = ", ".join(_COLUMNS.values())

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id              TEXT PRIMARY KEY,
    idempotency_key TEXT NOT NULL,
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
    updated_at      INTEGER NOT NULL,
    result          TEXT,
    template_id     TEXT,
    cron_policy     TEXT,
    fire_at         INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS jobs_tenant_key ON jobs (tenant_id, idempotency_key);
CREATE INDEX IF NOT EXISTS jobs_tenant ON jobs (tenant_id, created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS jobs_tenant_status ON jobs (tenant_id, status, created_at DESC, id DESC);
"""


def to_millis(value: datetime) -> int:
    """A time as stored: milliseconds since the epoch. (Values come from model.utc, whole
    milliseconds, so rounding is exact.)"""
    return round(value.timestamp() * 1000)


def from_millis(value: int) -> datetime:
    """A stored time read back, in UTC."""
    return datetime.fromtimestamp(value / 1000, UTC)


def to_nullable_millis(value: datetime | None) -> int | None:
    """:func:`to_millis` for a nullable column: no time is NULL."""
    return None if value is None else to_millis(value)


def from_nullable_millis(value: int | None) -> datetime | None:
    """:func:`from_millis` of a nullable column: NULL is no time."""
    return None if value is None else from_millis(value)


def _json_of(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _replays_of(value: Any) -> str | None:
    return json.dumps([r.to_json() for r in value], separators=(",", ":")) if value else None


#: Job field -> how its (non-None) value is stored; fields not named are stored as they are.
#: A table, not a chain of tests: every transition encodes several fields on the hot path.
_ENCODERS: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(JOB_TIME_FIELDS, to_millis),
    "payload": _json_of,
    "result": _json_of,
    "status": lambda value: value.value if type(value) is Status else Status(value).value,
    "cron_policy": lambda value: json.dumps(value.to_storage(), separators=(",", ":")),
    "replays": _replays_of,
    "step": lambda value: json.dumps(value.to_json(), separators=(",", ":")),
    "step_dirty": int,
}


def _to_db(field: str, value: Any) -> Any:
    if value is None:
        return None
    encode = _ENCODERS.get(field)
    return value if encode is None else encode(value)


#: Columns added after the first release: (column, definition), added to older files at start
#: (and to new ones: ``cron_buffered``, ``cancel_requested_at``, ``replays``,
#: ``managed_by``, the workflow and flow-control columns, ``finished_at`` and ``trace_parent``
#: exist only through this list).
_ADDED_COLUMNS = (
    ("cron_policy", "TEXT"),
    ("result", "TEXT"),
    ("template_id", "TEXT"),
    ("fire_at", "INTEGER"),
    ("cron_buffered", "INTEGER"),
    ("cancel_requested_at", "INTEGER"),
    ("replays", "TEXT"),
    ("managed_by", "TEXT"),
    ("workflow_id", "TEXT"),
    ("step", "TEXT"),
    ("spawned_by", "TEXT"),
    ("step_dirty", "INTEGER NOT NULL DEFAULT 0"),
    ("fairness_key", "TEXT NOT NULL DEFAULT ''"),
    ("concurrency_key", "TEXT"),
    ("key_slot", "TEXT"),
    ("type_slot", "TEXT"),
    ("finished_at", "INTEGER"),
    ("trace_parent", "TEXT"),
)


def _migrate(conn: sqlite3.Connection) -> None:
    """Add the columns a file created by an older version lacks (idempotent)."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    for column, definition in _ADDED_COLUMNS:
        if column not in present:
            conn.execute(f"ALTER TABLE jobs ADD COLUMN {column} {definition}")
    if "finished_at" not in present and conn.execute("SELECT 1 FROM jobs LIMIT 1").fetchone():
        # A finished job of an older file finished when it was last updated.
        final = ", ".join(f"'{status.value}'" for status in FINAL)
        conn.execute(f"UPDATE jobs SET finished_at = updated_at WHERE status IN ({final})")


_FIELDS = tuple(_COLUMNS)
_TIME_INDEXES = tuple(i for i, field in enumerate(_FIELDS) if field in JOB_TIME_FIELDS)
_PAYLOAD_INDEX = _FIELDS.index("payload")
_STATUS_INDEX = _FIELDS.index("status")
_CRON_POLICY_INDEX = _FIELDS.index("cron_policy")
_RESULT_INDEX = _FIELDS.index("result")
_REPLAYS_INDEX = _FIELDS.index("replays")
_STEP_INDEX = _FIELDS.index("step")
_STEP_DIRTY_INDEX = _FIELDS.index("step_dirty")
_STATUSES = {status.value: status for status in Status}


def _from_row(row: Sequence[Any]) -> Job:
    # On the hot path (every transition returns its row): positional, no intermediate dict.
    values = list(row)
    for i in _TIME_INDEXES:
        millis = values[i]
        if millis is not None:
            # Exact: a float of whole milliseconds rounds back to the same microsecond.
            values[i] = from_millis(millis)
    payload = values[_PAYLOAD_INDEX]
    values[_PAYLOAD_INDEX] = {} if payload == "{}" else json.loads(payload)
    values[_STATUS_INDEX] = _STATUSES[values[_STATUS_INDEX]]
    policy = values[_CRON_POLICY_INDEX]
    if policy is not None:
        values[_CRON_POLICY_INDEX] = CronPolicy.from_storage(json.loads(policy))
    result = values[_RESULT_INDEX]
    if result is not None:
        values[_RESULT_INDEX] = json.loads(result)
    replays = values[_REPLAYS_INDEX]
    values[_REPLAYS_INDEX] = (
        () if replays is None else tuple(Replay.from_json(r) for r in json.loads(replays))
    )
    step = values[_STEP_INDEX]
    if step is not None:
        values[_STEP_INDEX] = _step(step)
    values[_STEP_DIRTY_INDEX] = bool(values[_STEP_DIRTY_INDEX])
    return Job(**dict(zip(_FIELDS, values, strict=True)))


@functools.lru_cache(maxsize=4096)
def _step(text: str) -> Step:
    """A step's column decoded (cached: a step is read back by each of its moves, and a
    Step is immutable)."""
    return Step.from_json(json.loads(text))


@functools.lru_cache(maxsize=256)
def _update_sql(
    set_fields: tuple[str, ...],
    expect_shape: tuple[tuple[str, int], ...],
    inc_fields: tuple[str, ...] = (),
    returning: bool = True,
) -> str:
    """The UPDATE for a Change of this shape (cached: transitions have a handful of shapes).

    ``expect_shape`` is (field, n): n > 0 is ``IN`` with n values, 0 is ``=``, -1 is NULL.
    ``inc_fields`` are added to (``column = column + ?``), after the ``set_fields``.
    ``returning`` False leaves out the read-back of the updated row (``RETURNING``).
    """
    assignments = ", ".join(
        [f"{_COLUMNS[f]} = ?" for f in set_fields]
        + [f"{_COLUMNS[f]} = {_COLUMNS[f]} + ?" for f in inc_fields]
    )
    conditions = ["id = ?"]
    for field, n in expect_shape:
        column = _COLUMNS[field]
        if n > 0:
            conditions.append(f"{column} IN ({', '.join('?' * n)})")
        elif n < 0:
            conditions.append(f"{column} IS NULL")
        else:
            conditions.append(f"{column} = ?")
    update = f"UPDATE jobs SET {assignments} WHERE {' AND '.join(conditions)}"
    return f"{update} RETURNING {_SELECT}" if returning else update


def _millis(dt: datetime) -> int:
    value: int = _to_db("created_at", dt)
    return value
