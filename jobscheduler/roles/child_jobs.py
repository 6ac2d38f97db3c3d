"""The job a running handler asks for (``ctx.enqueue`` and ``ctx.spawn``), validated as
``POST /jobs`` would validate it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from jobscheduler.domain.model import Job, format_time
from jobscheduler.domain.validation import parse_create_request
from jobscheduler.handlers.children import ChildRequest

from .deps import Deps


def requested_job(
    deps: Deps, parent: Job, request: ChildRequest, *, idempotency_key: str, now: datetime
) -> Job:
    """The job ``request`` asks ``parent``'s handler to store, in ``parent``'s tenant under
    ``idempotency_key`` (ValidationError with the API's message)."""
    body: dict[str, Any] = {
        "idempotencyKey": idempotency_key,
        "tenantId": parent.tenant_id,
        "jobType": request.job_type,
        "payload": request.payload,
        "scheduledAt": request.scheduled_at
        or format_time(now + timedelta(seconds=request.delay or 0.0)),
        "priority": request.priority,
        "maxAttempts": request.max_attempts,
    }
    return parse_create_request(
        {k: v for k, v in body.items() if v is not None},
        now=now,
        job_types=deps.registry.validators(),
        max_attempts_defaults=deps.registry.max_attempts_defaults(),
    )
