"""What clients send, validated: a create request's body, a JSON body, ``GET /jobs``'s
query. Each refusal is a :class:`~jobscheduler.errors.ValidationError` naming the field (a
400 at the API); what passes becomes a :class:`~jobscheduler.domain.model.Job` or plain values.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from jobscheduler.errors import ValidationError

from . import cron
from .model import (
    DEFAULT_LIST_LIMIT,
    DEFAULT_MAX_ATTEMPTS,
    LISTABLE_STATUSES,
    MAX_ATTEMPTS_LIMIT,
    MAX_LIST_LIMIT,
    MAX_PRIORITY,
    MAX_STRING_LENGTH,
    Job,
    Status,
    new_job_id,
    parse_time,
    utc,
)

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
        "managedBy",
        "fairnessKey",
        "concurrencyKey",
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
    return check_text(value, field)


_SURROGATE_MESSAGE = "must be valid Unicode (a lone UTF-16 surrogate like \\ud800 is not)"


def check_text(value: str, field: str, *, limit: int = MAX_STRING_LENGTH) -> str:
    """``value``, a request's free-text ``field`` already known to be a non-empty string,
    if it is at most ``limit`` characters, without control characters and valid Unicode (no
    lone UTF-16 surrogate); else ValidationError saying which."""
    if len(value) > limit:
        raise ValidationError(f"{field}: longer than {limit} characters")
    if any(ord(ch) < 32 for ch in value):
        raise ValidationError(f"{field}: must not contain control characters")
    if not is_valid_unicode(value):
        raise ValidationError(f"{field}: {_SURROGATE_MESSAGE}")
    return value


def is_valid_unicode(text: str) -> bool:
    """False when ``text`` holds a lone UTF-16 surrogate (JSON's ``"\\ud800"``), which no
    store can encode: SQLite and BSON both need valid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_payload_strings(payload: Mapping[str, Any]) -> None:
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
    check_payload_strings(payload)
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

    managed_by = _string(body, "managedBy", required=False)
    fairness_key = _string(body, "fairnessKey", required=False) or ""
    concurrency_key = _string(body, "concurrencyKey", required=False)
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
        if managed_by is not None:
            raise ValidationError("managedBy: only applies to cron templates")
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
        managed_by=managed_by,
        fairness_key=fairness_key,
        concurrency_key=concurrency_key,
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
    return tenant, status, parse_list_limit(args.get("limit"))


def parse_list_limit(raw: str | None) -> int:
    """A listing's ``limit``: the default when absent or not a positive integer, at most
    MAX_LIST_LIMIT."""
    limit = DEFAULT_LIST_LIMIT
    if raw:
        try:
            parsed = int(raw)
        except ValueError:
            parsed = 0
        if parsed > 0:
            limit = min(parsed, MAX_LIST_LIMIT)
    return limit


def parse_limit(raw: str | None, *, default: int, maximum: int) -> int:
    """A listing's ``limit``: ``default`` when not given, else an integer 1..``maximum``
    (400 otherwise)."""
    if raw is None:
        return default
    try:
        limit = int(raw)
    except ValueError:
        raise ValidationError("limit: must be an integer") from None
    if not 1 <= limit <= maximum:
        raise ValidationError(f"limit: must be between 1 and {maximum}")
    return limit
