"""What the requests carry: bodies, filters and queries in the API's names, built from the
clients' Python keywords and checked before anything is sent."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Unpack

from ._types import MAX_BULK_IDS, SORTS, Filter, Selection


def format_time(value: datetime | str) -> str:
    """RFC3339 in UTC; a naive datetime is refused (its zone would be a guess)."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("a timezone-aware datetime is needed (e.g. datetime.now(UTC))")
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def job_body(
    job_type: str,
    *,
    tenant_id: str,
    payload: Mapping[str, Any] | None = None,
    scheduled_at: datetime | str | None = None,
    cron: str | None = None,
    idempotency_key: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    **schedule: Any,
) -> dict[str, Any]:
    """A ``POST /jobs`` body. Without ``scheduled_at`` or ``cron`` the job is due now;
    without ``idempotency_key`` a random one is used (pass your own to retry safely).
    ``schedule`` takes a template's settings by their API names (``timezone``, ``catchUp``,
    ``jitter``, ...)."""
    body: dict[str, Any] = {
        "idempotencyKey": idempotency_key or f"client-{uuid.uuid4().hex}",
        "tenantId": tenant_id,
        "jobType": job_type,
    }
    if payload is not None:
        body["payload"] = dict(payload)
    if cron is not None:
        body["cron"] = cron
    else:
        body["scheduledAt"] = format_time(scheduled_at or datetime.now(UTC))
    if priority is not None:
        body["priority"] = priority
    if max_attempts is not None:
        body["maxAttempts"] = max_attempts
    body.update({k: v for k, v in schedule.items() if v is not None})
    return body


def _text(value: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name}: must be a non-empty string")
    return value


def job_filter(
    *,
    tenant_id: str | None = None,
    status: str | Sequence[str] | None = None,
    job_type: str | None = None,
    template_id: str | None = None,
    cron: bool | None = None,
    created_after: datetime | str | None = None,
    created_before: datetime | str | None = None,
    finished_before: datetime | str | None = None,
    idempotency_key: str | None = None,
    idempotency_key_prefix: str | None = None,
) -> Filter:
    """A filter in the API's names (the query of ``GET /jobs``, the body of bulk actions)."""
    out: Filter = {}
    if tenant_id is not None:
        out["tenantId"] = tenant_id
    if status is not None:
        out["status"] = [status] if isinstance(status, str) else list(status)
    if job_type is not None:
        out["jobType"] = job_type
    if template_id is not None:
        out["templateId"] = template_id
    if cron is not None:
        out["cron"] = cron
    if created_after is not None:
        out["createdAfter"] = format_time(created_after)
    if created_before is not None:
        out["createdBefore"] = format_time(created_before)
    if finished_before is not None:
        out["finishedBefore"] = format_time(finished_before)
    if idempotency_key is not None and idempotency_key_prefix is not None:
        raise ValueError("give idempotency_key or idempotency_key_prefix, not both")
    if idempotency_key is not None:
        out["idempotencyKey"] = _text(idempotency_key, "idempotency_key")
    if idempotency_key_prefix is not None:
        out["idempotencyKeyPrefix"] = _text(idempotency_key_prefix, "idempotency_key_prefix")
    return out


def list_params(
    tenant_id: str | None,
    *,
    sort: str | None = None,
    page_size: int | None = None,
    all_tenants: bool | None = None,
    cursor: str | None = None,
    **selection: Unpack[Selection],
) -> list[tuple[str, str]]:
    """The query of the first ``GET /jobs`` page: the filter (of every tenant with
    ``all_tenants``), ``sort`` and ``limit``."""
    values = job_filter(tenant_id=tenant_id, **selection)
    if all_tenants:
        if tenant_id is not None:
            raise ValueError("give tenant_id or all_tenants=True, not both")
        values = {"allTenants": True, **values}
    if sort is not None:
        if sort not in SORTS:
            raise ValueError(f"sort: unknown order {sort!r} (accepted: {', '.join(SORTS)})")
        values["sort"] = sort
    if page_size is not None:
        values["limit"] = page_size
    if cursor is not None:
        values["cursor"] = cursor
    return query_of(values)


def bulk_ids(ids: Iterable[str] | None) -> list[str] | None:
    """``filter.ids``: 1 to :data:`MAX_BULK_IDS` job ids (a lone string is refused: it
    would read as one id per character)."""
    if ids is None:
        return None
    if isinstance(ids, str):
        raise ValueError("ids: give a list of job ids, not one string")
    chosen = [job_id_of(job_id) for job_id in ids]
    if not chosen:
        raise ValueError("ids: give at least one job id")
    if len(chosen) > MAX_BULK_IDS:
        raise ValueError(f"ids: at most {MAX_BULK_IDS} per request, got {len(chosen)}")
    return chosen


def query_of(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Query pairs: lists repeat the name, booleans are ``true``/``false``."""
    pairs: list[tuple[str, str]] = []
    for name, value in values.items():
        items = value if isinstance(value, list) else [value]
        for item in items:
            text = ("true" if item else "false") if isinstance(item, bool) else str(item)
            pairs.append((name, text))
    return pairs


def job_id_of(job_id: str) -> str:
    if not isinstance(job_id, str) or not job_id or "/" in job_id:
        raise ValueError(f"not a job id: {job_id!r}")
    return job_id


def given(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}
