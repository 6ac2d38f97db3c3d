"""``GET /jobs`` and the bulk actions' filters: validation, and the opaque page cursor.

Accepted query parameters are exactly :data:`LIST_PARAMETERS`; anything else is a 400 that
lists them (a typo must not silently return every job). ``status`` may repeat or hold a
comma-separated list. The seed's ``failed`` stays accepted although no job is ever written
with it: the seed's model names it, so a seed client filtering on it keeps getting an
answer (always empty) rather than a 400.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from .errors import ValidationError
from .model import (
    MAX_STRING_LENGTH,
    Status,
    is_job_id,
    is_valid_unicode,
    parse_list_query,
    parse_time,
)
from .store.query import Cursor, JobQuery

LIST_PARAMETERS = (
    "tenantId",
    "status",
    "jobType",
    "templateId",
    "cron",
    "createdAfter",
    "createdBefore",
    "limit",
    "cursor",
)
#: Fields of a bulk action's ``filter`` object (JSON names).
FILTER_FIELDS = (
    "tenantId",
    "status",
    "jobType",
    "templateId",
    "cron",
    "createdAfter",
    "createdBefore",
)
STATUS_NAMES = tuple(s.value for s in Status)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_statuses(values: Iterable[str], field: str = "status") -> tuple[Status, ...]:
    """Status names (each may be a comma-separated list) -> Statuses; 400 for unknown ones."""
    statuses: list[Status] = []
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if not name:
                continue
            try:
                status = Status(name)
            except ValueError:
                raise ValidationError(
                    f"{field}: unknown status {name[:40]!r} (accepted: {', '.join(STATUS_NAMES)})"
                ) from None
            if status not in statuses:
                statuses.append(status)
    return tuple(statuses)


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{field}: must be a non-empty string")
    if len(value) > MAX_STRING_LENGTH:
        raise ValidationError(f"{field}: longer than {MAX_STRING_LENGTH} characters")
    if any(ord(ch) < 32 for ch in value):
        raise ValidationError(f"{field}: must not contain control characters")
    if not is_valid_unicode(value):
        raise ValidationError(f"{field}: must be valid Unicode (no lone UTF-16 surrogates)")
    return value


def _flag(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return bool(value == "true")
    raise ValidationError(f"{field}: must be true or false")


def _filter(values: Mapping[str, Any], tenant: str | None) -> JobQuery:
    """The conditions shared by ``GET /jobs`` and the bulk filters (statuses excluded)."""
    template_id = values.get("templateId")
    if template_id is not None:
        template_id = _text(template_id, "templateId").lower()
        if not is_job_id(template_id):
            raise ValidationError("templateId: must be a 24-character hex ObjectId")
    job_type = values.get("jobType")
    bounds: dict[str, datetime | None] = {}
    for field in ("createdAfter", "createdBefore"):
        raw = values.get(field)
        bounds[field] = None if raw is None else parse_time(_text(raw, field), field)
    cron = values.get("cron")
    return JobQuery(
        tenant_id=tenant,
        job_type=None if job_type is None else _text(job_type, "jobType"),
        template_id=template_id,
        cron=None if cron is None else _flag(cron, "cron"),
        created_after=bounds["createdAfter"],
        created_before=bounds["createdBefore"],
    )


def parse_list_request(
    args: Mapping[str, str], statuses: Iterable[str]
) -> tuple[JobQuery, int, Cursor | None]:
    """Validate ``GET /jobs`` (``statuses``: every ``status`` value given) into the query,
    the page size and the cursor to continue after."""
    unknown = sorted(set(args) - set(LIST_PARAMETERS))
    if unknown:
        raise ValidationError(
            f"unknown query parameter(s): {', '.join(u[:40] for u in unknown)} "
            f"(accepted: {', '.join(LIST_PARAMETERS)})"
        )
    tenant, _, limit = parse_list_query(
        {k: v for k, v in args.items() if k in ("tenantId", "limit")}
    )
    query = _filter(args, tenant)
    raw_cursor = args.get("cursor")
    cursor = None if raw_cursor is None else decode_cursor(raw_cursor)
    return attrs.evolve(query, statuses=parse_statuses(statuses)), limit, cursor


def parse_filter(body: Any) -> tuple[JobQuery, str | None]:
    """Validate a bulk action's ``filter`` object into a query (its tenant unchecked: the
    caller scopes it) and the tenant it named."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ValidationError("filter: must be a JSON object")
    unknown = sorted(set(body) - set(FILTER_FIELDS))
    if unknown:
        raise ValidationError(
            f"filter: unknown field(s) {', '.join(u[:40] for u in unknown)} "
            f"(accepted: {', '.join(FILTER_FIELDS)})"
        )
    tenant = body.get("tenantId")
    if tenant is not None:
        tenant = _text(tenant, "filter.tenantId")
    raw_status = body.get("status")
    if raw_status is None:
        statuses: tuple[Status, ...] = ()
    elif isinstance(raw_status, str):
        statuses = parse_statuses([raw_status], "filter.status")
    elif isinstance(raw_status, list) and all(isinstance(s, str) for s in raw_status):
        statuses = parse_statuses(raw_status, "filter.status")
    else:
        raise ValidationError("filter.status: must be a status or a list of statuses")
    query = _filter(body, tenant)
    return attrs.evolve(query, statuses=statuses), tenant


def encode_cursor(cursor: Cursor) -> str:
    """Opaque to clients: base64url of the last job's creation time and id."""
    millis = (cursor.created_at - _EPOCH) // timedelta(milliseconds=1)
    raw = json.dumps([millis, cursor.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> Cursor:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        millis, job_id = json.loads(raw)
        if not isinstance(millis, int) or not isinstance(job_id, str) or not is_job_id(job_id):
            raise ValueError("bad cursor")
        return Cursor(created_at=_EPOCH + timedelta(milliseconds=millis), id=job_id)
    except (ValueError, TypeError, binascii.Error, OverflowError):
        raise ValidationError("cursor: not a cursor this API returned") from None
