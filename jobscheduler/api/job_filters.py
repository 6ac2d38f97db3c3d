"""``GET /jobs`` and the bulk actions' filters: validation, and the opaque page cursor.

Accepted query parameters are exactly :data:`LIST_PARAMETERS`, the ones ``GET /jobs``
declares; anything else is a 400 that lists them (a typo must not silently return every
job). ``status`` may repeat or hold a
comma-separated list. ``sort`` is one of :data:`SORTS` (``-createdAt``, the default: newest
first; ``createdAt``; ``scheduledAt``: soonest due first; ``-scheduledAt``); a cursor belongs
to the sort it was made for. The seed's ``failed`` stays accepted although no job is ever written
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

from jobscheduler.api.route_table import check_parameters
from jobscheduler.api.schemas.manage import FILTER, LIST_FILTERED, SORTS
from jobscheduler.domain.model import MAX_STRING_LENGTH, Status, is_job_id, parse_time
from jobscheduler.domain.validation import check_text, parse_list_limit, parse_list_query
from jobscheduler.errors import ValidationError
from jobscheduler.store.query import MAX_QUERY_IDS, Cursor, JobQuery, Sort

#: The query parameters ``GET /jobs`` declares.
LIST_PARAMETERS = LIST_FILTERED.query_names
#: Fields of a bulk action's ``filter`` object (JSON names), as its schema declares them.
FILTER_FIELDS = tuple(FILTER["properties"])
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
    return check_text(value, field)


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
    for field in ("createdAfter", "createdBefore", "finishedBefore"):
        raw = values.get(field)
        bounds[field] = None if raw is None else parse_time(_text(raw, field), field)
    cron = values.get("cron")
    key = values.get("idempotencyKey")
    prefix = values.get("idempotencyKeyPrefix")
    if key is not None and prefix is not None:
        raise ValidationError("give idempotencyKey or idempotencyKeyPrefix, not both")
    return JobQuery(
        tenant_id=tenant,
        job_type=None if job_type is None else _text(job_type, "jobType"),
        template_id=template_id,
        cron=None if cron is None else _flag(cron, "cron"),
        created_after=bounds["createdAfter"],
        created_before=bounds["createdBefore"],
        finished_before=bounds["finishedBefore"],
        idempotency_key=None if key is None else _text(key, "idempotencyKey"),
        key_prefix=None if prefix is None else _text(prefix, "idempotencyKeyPrefix"),
    )


def parse_sort(raw: str | None) -> Sort:
    """``sort`` (default ``-createdAt``) -> Sort; 400 for anything else."""
    if raw is None:
        return Sort.CREATED_DESC
    try:
        return Sort(raw.strip())
    except ValueError:
        raise ValidationError(
            f"sort: unknown order {raw[:40]!r} (accepted: {', '.join(SORTS)})"
        ) from None


def parse_ids(raw: Any, field: str = "filter.ids") -> tuple[str, ...]:
    """A list of 1 to MAX_QUERY_IDS job ids (lower-cased, duplicates dropped)."""
    if not isinstance(raw, list) or not raw:
        raise ValidationError(f"{field}: must be a non-empty array of job ids")
    if len(raw) > MAX_QUERY_IDS:
        raise ValidationError(f"{field}: at most {MAX_QUERY_IDS} ids, got {len(raw)}")
    ids: list[str] = []
    for value in raw:
        if not isinstance(value, str) or not is_job_id(value.lower()):
            raise ValidationError(f"{field}: each id must be a 24-character hex ObjectId")
        if value.lower() not in ids:
            ids.append(value.lower())
    return tuple(ids)


def parse_tenant_query(args: Mapping[str, str]) -> str | None:
    """The ``tenantId`` a query names, if any (400 for an empty or over-long one)."""
    requested = args.get("tenantId")
    if requested is not None and (not requested.strip() or len(requested) > MAX_STRING_LENGTH):
        raise ValidationError(f"tenantId: must be 1 to {MAX_STRING_LENGTH} characters")
    return requested


def wants_all_tenants(args: Mapping[str, str]) -> bool:
    """Whether a ``GET /jobs`` query asks for every tenant's jobs (``allTenants=true``);
    400 for another value, or for ``allTenants=true`` beside a ``tenantId``."""
    raw = args.get("allTenants")
    if raw is None or not _flag(raw, "allTenants"):
        return False
    if args.get("tenantId") is not None:
        raise ValidationError("give tenantId or allTenants=true, not both")
    return True


def parse_list_request(
    args: Mapping[str, str], statuses: Iterable[str]
) -> tuple[JobQuery, int, Cursor | None]:
    """Validate ``GET /jobs`` (``statuses``: every ``status`` value given) into the query,
    the page size and the cursor to continue after. The query's tenant is None with
    ``allTenants=true`` (whether the caller may ask is the route's to check)."""
    check_parameters(args, LIST_PARAMETERS)
    if wants_all_tenants(args):
        tenant: str | None = None
        limit = parse_list_limit(args.get("limit"))
    else:
        tenant, _, limit = parse_list_query(
            {k: v for k, v in args.items() if k in ("tenantId", "limit")}
        )
    query = _filter(args, tenant)
    sort = parse_sort(args.get("sort"))
    raw_cursor = args.get("cursor")
    cursor = None if raw_cursor is None else decode_cursor(raw_cursor, sort)
    return attrs.evolve(query, statuses=parse_statuses(statuses), sort=sort), limit, cursor


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
    ids = () if body.get("ids") is None else parse_ids(body["ids"])
    return attrs.evolve(query, statuses=statuses, ids=ids), tenant


def encode_cursor(cursor: Cursor) -> str:
    """Opaque to clients: base64url of the last job's sort-field time and id (and the sort,
    unless it is the default, so cursors of the default order keep their old form)."""
    millis = (cursor.at - _EPOCH) // timedelta(milliseconds=1)
    parts: list[Any] = [millis, cursor.id]
    if cursor.sort is not Sort.CREATED_DESC:
        parts.append(cursor.sort.value)
    raw = json.dumps(parts, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str, sort: Sort = Sort.CREATED_DESC) -> Cursor:
    """The cursor ``text`` stands for; 400 if it is not one, or was made for another sort."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        parts = json.loads(raw)
        if not isinstance(parts, list) or len(parts) not in (2, 3):
            raise ValueError("bad cursor")
        millis, job_id = parts[0], parts[1]
        made_for = Sort(parts[2]) if len(parts) == 3 else Sort.CREATED_DESC
        if not isinstance(millis, int) or not isinstance(job_id, str) or not is_job_id(job_id):
            raise ValueError("bad cursor")
        cursor = Cursor(at=_EPOCH + timedelta(milliseconds=millis), id=job_id, sort=made_for)
    except (ValueError, TypeError, binascii.Error, OverflowError):
        raise ValidationError("cursor: not a cursor this API returned") from None
    if made_for is not sort:
        raise ValidationError(
            f"cursor: made for sort={made_for.value}, not sort={sort.value} (start again)"
        )
    return cursor
