"""The job model, its JSON shape, and validation of create requests.

A job is one record in the store. Its JSON shape (the HTTP contract) is produced in exactly
one function, :func:`job_to_json`. Timestamps are always timezone-aware UTC.
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
from bson import ObjectId

from . import cron
from .cron import CronPolicy
from .errors import ValidationError

MAX_STRING_LENGTH = 256
MAX_ATTEMPTS_LIMIT = 100
MAX_PRIORITY = 1_000_000
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_LIST_LIMIT = 100
MAX_LIST_LIMIT = 5000
MAX_ERROR_LENGTH = 2000

_OBJECT_ID = re.compile(r"[0-9a-f]{24}")


class Status(enum.StrEnum):
    """Where a job is in its lifecycle. Only :mod:`jobscheduler.states` moves a job between them."""

    #: Stored, waiting for ``scheduledAt``; cron templates stay here between fire times.
    PENDING = "pending"
    #: Claimed by the scheduler and announced on the bus; no executor has it yet.
    QUEUED = "queued"
    #: An executor took it (``claimedBy``/``claimedAt``/claim token set) and is about to run it.
    CLAIMED = "claimed"
    #: The handler is running; the executor refreshes ``heartbeatAt``.
    RUNNING = "running"
    #: The handler returned successfully. Final.
    COMPLETED = "completed"
    #: Defined by the seed's model but never written: failures go to pending or dlq.
    FAILED = "failed"
    #: Attempts exhausted (or a cron template that no longer parses). Final; never claimed.
    DLQ = "dlq"
    #: Cancelled by a user (a retired cron template, too). Final until retried.
    CANCELLED = "cancelled"
    #: A cron template that does not fire until resumed.
    PAUSED = "paused"


LISTABLE_STATUSES = tuple(s.value for s in Status)


def _aware(instance: object, attribute: attrs.Attribute[Any], value: datetime | None) -> None:
    # Identity first: stores and ``utc`` hand out ``datetime.UTC`` itself, and this runs six
    # times for every job decoded on the hot path.
    if value is None or value.tzinfo is UTC:
        return
    if value.tzinfo is None or value.utcoffset() != timedelta(0):
        raise ValueError(f"{attribute.name} must be timezone-aware UTC, got {value!r}")


@attrs.frozen(kw_only=True)
class Job:
    """One job document. Immutable: every change produces a new value from the store."""

    id: str
    idempotency_key: str
    tenant_id: str
    job_type: str
    payload: dict[str, Any] = attrs.field(factory=dict)
    priority: int = 0
    status: Status = Status.PENDING
    scheduled_at: datetime = attrs.field(validator=_aware)
    cron: str | None = None
    #: A template's zone, DST, catch-up and jitter settings; None reads as the defaults.
    cron_policy: CronPolicy | None = None
    attempts: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    last_error: str | None = None
    claimed_by: str | None = None
    claimed_at: datetime | None = attrs.field(default=None, validator=_aware)
    claim_token: str | None = None
    heartbeat_at: datetime | None = attrs.field(default=None, validator=_aware)
    queued_at: datetime | None = attrs.field(default=None, validator=_aware)
    created_at: datetime = attrs.field(validator=_aware)
    updated_at: datetime = attrs.field(validator=_aware)
    #: A template's fire time held by ``overlap="buffer_one"`` until its previous run ends.
    cron_buffered: datetime | None = attrs.field(default=None, validator=_aware)
    #: The handler's return value (JSON; at most 64 KiB encoded), set when it completes.
    result: Any = None
    #: For a cron run: the id of the template that spawned it.
    template_id: str | None = None
    #: For a cron run: the fire time it stands for. (template_id, fire_at) identifies a run
    #: (its own unique index in every store), whatever its idempotency key.
    fire_at: datetime | None = attrs.field(default=None, validator=_aware)
    #: A running job's cancel request; the executor's next heartbeat stops the handler.
    cancel_requested_at: datetime | None = attrs.field(default=None, validator=_aware)
    #: The job's retries by a user, oldest first (at most MAX_REPLAYS kept).
    replays: tuple[Replay, ...] = ()

    @property
    def run(self) -> int:
        """Which run of the job this is: 0 until a user retries it, then 1, 2, ...
        (the newest replay says; one written before replays were numbered counts by its
        place in the list)."""
        if not self.replays:
            return 0
        last = self.replays[-1].run
        return last if last is not None else len(self.replays)


@attrs.frozen(kw_only=True)
class Replay:
    """One retry of a dlq or cancelled job by a user: when, and what it left behind."""

    at: datetime = attrs.field(validator=_aware)
    previous_status: Status
    previous_error: str | None = None
    previous_attempts: int = 0
    #: The run this replay started (1 for the first retry); None in a replay stored before
    #: runs were numbered.
    run: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "at": format_time(self.at),
            "previousStatus": self.previous_status.value,
            "previousAttempts": self.previous_attempts,
        }
        if self.run is not None:
            out["run"] = self.run
        if self.previous_error is not None:
            out["previousError"] = self.previous_error
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Replay:
        """The inverse of :meth:`to_json` (how both stores keep replays)."""
        return cls(
            at=parse_time(data["at"], "replays.at"),
            previous_status=Status(data["previousStatus"]),
            previous_error=data.get("previousError"),
            previous_attempts=int(data.get("previousAttempts", 0)),
            run=None if data.get("run") is None else int(data["run"]),
        )


#: How many replays a job remembers (the oldest are dropped first).
MAX_REPLAYS = 20


def new_job_id() -> str:
    """A fresh 24-hex ObjectId, the id format of the contract (and Mongo's ``_id``)."""
    return str(ObjectId())


def is_job_id(text: str) -> bool:
    return bool(_OBJECT_ID.fullmatch(text))


def utc(dt: datetime) -> datetime:
    """Normalise an aware datetime to UTC, truncated to milliseconds.

    Milliseconds are what MongoDB keeps; truncating everywhere makes every store return
    exactly the timestamps it was given, so equality conditions on them are portable.
    """
    if dt.tzinfo is UTC and not dt.microsecond % 1000:
        return dt  # already normalised (the common case on the hot path)
    if dt.tzinfo is None:
        raise ValueError("naive datetime")
    dt = dt.astimezone(UTC)
    return dt.replace(microsecond=dt.microsecond - dt.microsecond % 1000)


def format_time(dt: datetime) -> str:
    """RFC3339 UTC with ``Z``; fractional seconds only when present."""
    dt = dt.astimezone(UTC)
    # strftime's %Y does not zero-pad years before 1000; RFC3339 needs four digits.
    text = (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    )
    if dt.microsecond:
        text += f".{dt.microsecond // 1000:03d}"
    return text + "Z"


_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?"
    r"(Z|z|[+-][0-9]{2}:[0-9]{2})"
)


def parse_time(text: str, field: str) -> datetime:
    """Parse an RFC3339 timestamp; a missing timezone is a ValidationError."""
    match = _RFC3339.fullmatch(text)
    if not match:
        raise ValidationError(
            f"{field}: must be an RFC3339 timestamp with a timezone, e.g. 2026-09-29T18:00:00Z"
        )
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7), match.group(8)
    micros = int((fraction[1:] + "000000")[:6]) if fraction else 0
    if zone in ("Z", "z"):
        offset = timedelta(0)
    else:
        sign = 1 if zone[0] == "+" else -1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            raise ValidationError(f"{field}: invalid timezone offset {zone!r}")
        offset = sign * timedelta(hours=hours, minutes=minutes)
    if second == 60:  # leap second: RFC3339 allows it, datetime does not
        second = 59
    try:
        return utc(datetime(year, month, day, hour, minute, second, micros, tzinfo=UTC) - offset)
    except (ValueError, OverflowError) as exc:
        raise ValidationError(f"{field}: out of range: {exc}") from None


def job_to_json(job: Job) -> dict[str, Any]:
    """The contract's JSON shape of a job (absent optional fields are omitted)."""
    out: dict[str, Any] = {
        "id": job.id,
        "idempotencyKey": job.idempotency_key,
        "tenantId": job.tenant_id,
        "jobType": job.job_type,
        "payload": job.payload,
        "priority": job.priority,
        "status": job.status.value,
        "scheduledAt": format_time(job.scheduled_at),
    }
    if job.cron is not None:
        out["cron"] = job.cron
        out.update(cron_template_json(job))
        if job.cron_buffered is not None:
            out["bufferedFireAt"] = format_time(job.cron_buffered)
    if job.template_id is not None:
        out["templateId"] = job.template_id
    if job.claimed_by is not None:
        out["claimedBy"] = job.claimed_by
    if job.claimed_at is not None:
        out["claimedAt"] = format_time(job.claimed_at)
    out["attempts"] = job.attempts
    out["maxAttempts"] = job.max_attempts
    if job.last_error is not None:
        out["lastError"] = job.last_error
    if job.result is not None:
        out["result"] = job.result
    if job.cancel_requested_at is not None:
        out["cancelRequestedAt"] = format_time(job.cancel_requested_at)
    if job.replays:
        out["replays"] = [replay.to_json() for replay in job.replays]
    out["createdAt"] = format_time(job.created_at)
    out["updatedAt"] = format_time(job.updated_at)
    return out


def cron_policy_of(job: Job) -> CronPolicy:
    """The template's schedule settings (the defaults for one stored without them)."""
    return job.cron_policy or cron.DEFAULT_POLICY


def cron_template_json(job: Job) -> dict[str, Any]:
    """A template's schedule fields and ``nextFireLocal`` (its scheduledAt in its zone)."""
    policy = cron_policy_of(job)
    out = policy.to_json()
    # A hand-edited, unknown zone shows no local time; the scheduler dead-letters it.
    with contextlib.suppress(ValidationError):
        out["nextFireLocal"] = policy.local(job.scheduled_at).isoformat()
    return out


# --------------------------------------------------------------------------- requests

_CREATE_FIELDS = frozenset(
    {
        "idempotencyKey",
        "tenantId",
        "jobType",
        "payload",
        "priority",
        "scheduledAt",
        "cron",
        "maxAttempts",
        *cron.POLICY_FIELDS,
    }
)

PayloadValidator = Callable[[Mapping[str, Any]], None]


def _string(body: Mapping[str, Any], field: str, *, required: bool) -> str | None:
    value = body.get(field)
    if value is None:
        if required:
            raise ValidationError(f"{field} is required")
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{field}: must be a string")
    if not value.strip():
        raise ValidationError(f"{field}: must not be empty")
    if len(value) > MAX_STRING_LENGTH:
        raise ValidationError(f"{field}: longer than {MAX_STRING_LENGTH} characters")
    if any(ord(ch) < 32 for ch in value):
        raise ValidationError(f"{field}: must not contain control characters")
    if not is_valid_unicode(value):
        raise ValidationError(f"{field}: {_SURROGATE_MESSAGE}")
    return value


_SURROGATE_MESSAGE = "must be valid Unicode (a lone UTF-16 surrogate like \\ud800 is not)"


def is_valid_unicode(text: str) -> bool:
    """False when ``text`` holds a lone UTF-16 surrogate (JSON's ``"\\ud800"``), which no
    store can encode: SQLite and BSON both need valid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_payload_strings(payload: Mapping[str, Any]) -> None:
    """Every key and string value in ``payload``, at any depth, must be valid Unicode.

    Iterative, so a deeply nested payload (as deep as the JSON parser allows) cannot
    overflow the stack here.
    """
    stack: list[tuple[str, Any]] = [("payload", payload)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if not is_valid_unicode(value):
                raise ValidationError(f"{path}: {_SURROGATE_MESSAGE}")
        elif isinstance(value, dict):
            for key, item in value.items():
                if not is_valid_unicode(key):
                    raise ValidationError(f"{path}: a key {_SURROGATE_MESSAGE}")
                stack.append((f"{path}.{key}", item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))


def _integer(body: Mapping[str, Any], field: str) -> int | None:
    value = body.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{field}: must be an integer")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise ValidationError(f"{field}: must be an integer")
        value = int(value)
    return value


def parse_create_request(
    body: Any,
    *,
    now: datetime,
    job_types: Mapping[str, PayloadValidator | None],
    max_attempts_defaults: Mapping[str, int] | None = None,
) -> Job:
    """Validate a ``POST /jobs`` body and build the pending job it describes.

    ``job_types`` maps every known job type to its payload validator (or None);
    ``max_attempts_defaults`` the job types whose handler sets its own default
    ``maxAttempts`` (used when the body does not say). Raises
    ValidationError with a client-safe message for anything outside the contract.
    """
    if not isinstance(body, dict):
        raise ValidationError("request body must be a JSON object")
    unknown = sorted(set(body) - _CREATE_FIELDS)
    if unknown:
        raise ValidationError(f"unknown field(s): {', '.join(unknown)}")

    key = _string(body, "idempotencyKey", required=True)
    tenant = _string(body, "tenantId", required=True)
    job_type = _string(body, "jobType", required=True)
    assert key is not None
    assert tenant is not None
    assert job_type is not None
    if job_type not in job_types:
        raise ValidationError(
            f"jobType: unknown job type {job_type!r} (known: {', '.join(sorted(job_types))})"
        )

    payload = body.get("payload")
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise ValidationError("payload: must be a JSON object")
    _check_payload_strings(payload)
    validator = job_types[job_type]
    if validator is not None:
        validator(payload)

    priority = _integer(body, "priority")
    if priority is None:
        priority = 0
    if abs(priority) > MAX_PRIORITY:
        raise ValidationError(f"priority: must be between {-MAX_PRIORITY} and {MAX_PRIORITY}")

    max_attempts = _integer(body, "maxAttempts")
    if max_attempts is None or max_attempts <= 0:
        max_attempts = (max_attempts_defaults or {}).get(job_type, DEFAULT_MAX_ATTEMPTS)
    if max_attempts > MAX_ATTEMPTS_LIMIT:
        raise ValidationError(f"maxAttempts: must be at most {MAX_ATTEMPTS_LIMIT}")

    cron_expr = _string(body, "cron", required=False)
    scheduled_raw = body.get("scheduledAt")
    if cron_expr is not None:
        if scheduled_raw is not None:
            raise ValidationError("give either cron or scheduledAt, not both")
        cron_expr = cron.validate(cron_expr)
        cron_policy = cron.parse_policy(body, cron_expr)
        scheduled_at = utc(cron_policy.next_fire(cron_expr, now))
    else:
        given = sorted(f for f in cron.POLICY_FIELDS if body.get(f) is not None)
        if given:
            raise ValidationError(f"{', '.join(given)}: only apply to cron templates")
        cron_policy = None
        if scheduled_raw is None:
            raise ValidationError("scheduledAt is required unless cron is set")
        if not isinstance(scheduled_raw, str):
            raise ValidationError("scheduledAt: must be an RFC3339 string")
        scheduled_at = parse_time(scheduled_raw, "scheduledAt")

    now = utc(now)
    return Job(
        id=new_job_id(),
        idempotency_key=key,
        tenant_id=tenant,
        job_type=job_type,
        payload=payload,
        priority=priority,
        status=Status.PENDING,
        scheduled_at=scheduled_at,
        cron=cron_expr,
        cron_policy=cron_policy,
        max_attempts=max_attempts,
        created_at=now,
        updated_at=now,
    )


def loads_json_body(data: bytes) -> Any:
    """Parse a request body as strict JSON (no NaN/Infinity); ValidationError if malformed."""

    def reject_constant(name: str) -> Any:
        raise ValidationError(f"malformed JSON: {name} is not allowed")

    try:
        return json.loads(data, parse_constant=reject_constant)
    except ValidationError:
        raise
    except (ValueError, RecursionError) as exc:
        raise ValidationError(f"malformed JSON: {exc}") from None


def parse_list_query(args: Mapping[str, str]) -> tuple[str, Status | None, int]:
    """Validate ``GET /jobs`` query arguments into (tenant, status filter, limit)."""
    tenant = args.get("tenantId")
    if tenant is None or not tenant.strip():
        raise ValidationError("tenantId is required")
    if len(tenant) > MAX_STRING_LENGTH:
        raise ValidationError(f"tenantId: longer than {MAX_STRING_LENGTH} characters")
    if any(ord(ch) < 32 for ch in tenant):
        raise ValidationError("tenantId: must not contain control characters")
    if not is_valid_unicode(tenant):
        raise ValidationError(f"tenantId: {_SURROGATE_MESSAGE}")
    status_raw = args.get("status")
    status: Status | None = None
    if status_raw:
        try:
            status = Status(status_raw)
        except ValueError:
            raise ValidationError(
                f"status: must be one of {', '.join(LISTABLE_STATUSES)}"
            ) from None
    limit = DEFAULT_LIST_LIMIT
    raw_limit = args.get("limit")
    if raw_limit:
        try:
            parsed = int(raw_limit)
        except ValueError:
            parsed = 0
        if parsed > 0:
            limit = min(parsed, MAX_LIST_LIMIT)
    return tenant, status, limit


def truncate_error(text: str) -> str:
    return text if len(text) <= MAX_ERROR_LENGTH else text[: MAX_ERROR_LENGTH - 1] + "…"
