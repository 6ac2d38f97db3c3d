"""The audit trail: one append-only record per state-changing request.

Records are written by the API (:mod:`jobscheduler.api.tenancy` records every non-GET request
generically, plus key operations explicitly), kept in the job store beside the jobs (both
adapters), read by admins (``GET /audit``, ``jobscheduler audit``) and pruned by the reaper
after ``AUDIT_RETENTION``. Ids are ObjectIds, so they sort by creation time: the newest
record first, and ``before=<id>`` pages back.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from jobscheduler.errors import ValidationError

from .model import MAX_STRING_LENGTH, format_time, is_job_id, new_job_id, parse_time, utc
from .validation import parse_limit

DEFAULT_AUDIT_LIMIT = 100
MAX_AUDIT_LIMIT = 1000


@attrs.frozen(kw_only=True)
class AuditRecord:
    """What happened: when, by which key, on which tenant and job, with which result."""

    id: str = attrs.field(factory=new_job_id)
    at: datetime
    #: The API key's public id; None when authentication is off.
    key_id: str | None
    #: The tenant acted on (None: not known, e.g. a request refused before naming one).
    tenant: str | None
    #: ``<METHOD> <route>``, e.g. ``POST /jobs`` or ``DELETE /keys/<key_id>``.
    action: str
    job_id: str | None = None
    #: The HTTP status of the reply.
    status: int
    #: A short detail (e.g. the id of a key created or revoked).
    detail: str | None = None


def audit_fields(record: AuditRecord) -> dict[str, Any]:
    """The record's fields besides its id and time, under the names its JSON and its stored
    document both use."""
    return {
        "keyId": record.key_id,
        "tenantId": record.tenant,
        "action": record.action,
        "jobId": record.job_id,
        "status": record.status,
        "detail": record.detail,
    }


def audit_to_json(record: AuditRecord) -> dict[str, Any]:
    return {"id": record.id, "at": format_time(record.at), **audit_fields(record)}


@attrs.frozen(kw_only=True)
class AuditQuery:
    """Filters of a read of the audit trail (all optional; newest first)."""

    tenant: str | None = None
    key_id: str | None = None
    action: str | None = None
    job_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    #: Only records older than this record id (the cursor of the previous page).
    before: str | None = None
    limit: int = DEFAULT_AUDIT_LIMIT

    def matches(self, record: AuditRecord) -> bool:
        """The filter as a predicate (what every store's query must select)."""
        return (
            (self.tenant is None or record.tenant == self.tenant)
            and (self.key_id is None or record.key_id == self.key_id)
            and (self.action is None or record.action == self.action)
            and (self.job_id is None or record.job_id == self.job_id)
            and (self.since is None or record.at >= self.since)
            and (self.until is None or record.at < self.until)
            and (self.before is None or record.id < self.before)
        )


def _text(args: Mapping[str, str], name: str) -> str | None:
    value = args.get(name)
    if value is None or value == "":
        return None
    if len(value) > MAX_STRING_LENGTH:
        raise ValidationError(f"{name}: longer than {MAX_STRING_LENGTH} characters")
    if any(ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise ValidationError(f"{name}: must not contain control characters")
    return value


def parse_audit_query(args: Mapping[str, str]) -> AuditQuery:
    """``GET /audit`` query arguments (``tenantId keyId action jobId since until before
    limit``) into an AuditQuery; ValidationError for anything malformed."""
    known = {"tenantId", "keyId", "action", "jobId", "since", "until", "before", "limit"}
    unknown = sorted(set(args) - known)
    if unknown:
        raise ValidationError(f"unknown query parameter(s): {', '.join(unknown)}")
    job_id = _text(args, "jobId")
    if job_id is not None and not is_job_id(job_id):
        raise ValidationError("jobId: must be a 24-character hex ObjectId")
    before = _text(args, "before")
    if before is not None and not is_job_id(before):
        raise ValidationError("before: must be the id of an audit record")
    since, until = _text(args, "since"), _text(args, "until")
    limit = parse_limit(_text(args, "limit"), default=DEFAULT_AUDIT_LIMIT, maximum=MAX_AUDIT_LIMIT)
    return AuditQuery(
        tenant=_text(args, "tenantId"),
        key_id=_text(args, "keyId"),
        action=_text(args, "action"),
        job_id=job_id,
        since=parse_time(since, "since") if since else None,
        until=parse_time(until, "until") if until else None,
        before=before,
        limit=limit,
    )


def new_record(
    *,
    now: datetime,
    key_id: str | None,
    tenant: str | None,
    action: str,
    status: int,
    job_id: str | None = None,
    detail: str | None = None,
) -> AuditRecord:
    return AuditRecord(
        at=utc(now),
        key_id=key_id,
        tenant=tenant,
        action=action,
        job_id=job_id,
        status=status,
        detail=detail,
    )
