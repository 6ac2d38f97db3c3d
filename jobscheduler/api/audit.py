"""The audit trail of the API: every request that changes state, written by the
``after_request`` hook (:mod:`.hooks`) whatever route it hit, so routes added later are
audited without their help; a create writes its record with the job (:func:`create_record`).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

import trio
from quart import Response, g, request

from jobscheduler.domain.audit import AuditRecord, new_record
from jobscheduler.domain.keys import Principal
from jobscheduler.domain.model import Job
from jobscheduler.errors import JobSchedulerError

from .auth import current_principal
from .tenancy import Tenancy

log = logging.getLogger(__name__)

#: Methods that never change state (not audited).
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Longest a reply waits for its audit record to be written. A healthy store takes
#: milliseconds; past this the write goes on in the background (a detached bounded call) and
#: the reply is sent, so a stalled store does not also stall replies on their audit.
AUDIT_WAIT = 0.5
#: Largest JSON reply the audit hook reads to find the job id and tenant it names.
_AUDIT_PEEK_BYTES = 64 * 1024


async def _peek_json(response: Response) -> dict[str, Any]:
    """The reply's JSON object, if it is a small one (else {})."""
    if response.mimetype != "application/json":
        return {}
    length = response.content_length
    if length is None or length > _AUDIT_PEEK_BYTES:
        return {}
    try:
        body = json.loads(await response.get_data(as_text=False))
    except (ValueError, TypeError):
        return {}
    return body if isinstance(body, dict) else {}


def _action() -> str:
    rule = request.url_rule
    return f"{request.method} {rule.rule if rule is not None else 'unmatched'}"


def create_record(principal: Principal, job: Job, *, now: datetime, action: str) -> AuditRecord:
    """The audit record of a create of ``job`` by ``principal``, for when it succeeds (201).

    The create hands it to ``JobStore.insert``, which writes it with the job in one round
    trip (in the job's transaction on SQLite) rather than in a second write after the reply
    is built; :func:`mark_audited` then tells the audit hook it is written.
    """
    return new_record(
        now=now,
        key_id=principal.key_id,
        tenant=principal.tenant if principal.tenant is not None else job.tenant_id,
        action=action,
        status=201,
        job_id=job.id,
    )


def mark_audited() -> None:
    """The request's audit record is written (see :func:`create_record`)."""
    g.audited = True


async def request_record(tenancy: Tenancy, response: Response) -> AuditRecord:
    """The audit record of the request being finished."""
    principal = current_principal()
    action = _action()
    view_args = request.view_args or {}
    body = await _peek_json(response) if response.status_code < 300 else {}
    job_id = view_args.get("job_id") or (
        body.get("id") if isinstance(body.get("id"), str) and "jobType" in body else None
    )
    tenant = principal.tenant
    if tenant is None and isinstance(body.get("tenantId"), str):
        tenant = body["tenantId"]
    record = new_record(
        now=tenancy.deps.clock.now(),
        key_id=principal.key_id,
        tenant=tenant,
        action=action,
        status=response.status_code,
        job_id=job_id if isinstance(job_id, str) else None,
        detail=g.get("audit_detail"),
    )
    return record


async def append_record(tenancy: Tenancy, record: AuditRecord) -> None:
    """Write one audit record, bounded in time; a failure is logged and counted."""
    failed: str | None = None
    with trio.move_on_after(AUDIT_WAIT) as scope:
        try:
            await tenancy.call(tenancy.deps.store.append_audit, record)
        except JobSchedulerError as exc:
            failed = str(exc)
    if scope.cancelled_caught:
        if tenancy.calls is not None:
            return  # the bounded call goes on detached; a failure there is its own log line
        failed = f"not written within {AUDIT_WAIT}s"
    if failed is not None:
        tenancy.metrics.api_audit_failures.inc()
        log.error(
            "audit record not written",
            extra={
                "action": record.action,
                "job_id": record.job_id,
                "tenant": record.tenant,
                "error": failed,
            },
        )
