"""The job routes beside the create (:mod:`.create`): read one job and its attempts, create
a batch, and the public ones (health, the OpenAPI document).

:func:`visible_job` is how every route that names a job reads it: 400 for a malformed id,
404 for an unknown one and for another tenant's (the store's read carries the caller's
tenant, and answers another tenant's job exactly as a missing one, so no reply tells
whether another tenant's id exists).
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Sequence
from typing import Any

from quart import Response, g, request

from jobscheduler.api.auth import current_principal
from jobscheduler.api.bodies import any_json_body
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.openapi import openapi_document
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.schemas import jobs as ops
from jobscheduler.api.schemas import manage as manage_ops
from jobscheduler.api.tenancy import Tenancy, claim_tenant
from jobscheduler.domain.attempts import attempt_to_json
from jobscheduler.domain.model import Job, is_job_id, job_to_json
from jobscheduler.errors import UnsupportedMediaType, ValidationError
from jobscheduler.observability.tracecontext import HEADER as TRACEPARENT
from jobscheduler.observability.tracecontext import normalize_traceparent
from jobscheduler.roles.deps import Deps
from jobscheduler.store.base import InsertOutcome

from .batch import create_batch, parse_batch_request
from .flow import held_text

log = logging.getLogger(__name__)


def parse_job_id(raw: str) -> str:
    """A job id of a path (lower-cased); 400 unless it is 24 hexadecimal characters."""
    job_id = raw.lower()
    if not is_job_id(job_id):
        raise ValidationError("id: must be a 24-character hex ObjectId")
    return job_id


async def visible_job(deps: Deps, calls: BoundedCalls, raw_id: str) -> Job:
    """The job ``raw_id`` names, if the caller may see it (see the module doc)."""
    return await calls.call(deps.store.get, parse_job_id(raw_id), tenant=current_principal().tenant)


def register_job_routes(
    routes: RouteTable, deps: Deps, tenancy: Tenancy, calls: BoundedCalls
) -> None:
    """Add the routes of this module to ``routes``."""
    job_types = deps.registry.validators()
    max_attempts_defaults = deps.registry.max_attempts_defaults()

    @routes.route(ops.HEALTHZ)
    async def healthz() -> Response:
        return Response("ok", status=200, content_type="text/plain; charset=utf-8")

    document: dict[str, Any] = {}

    @routes.route(ops.OPENAPI)
    async def openapi() -> Response:
        if not document:  # built on first use: every module has registered its routes
            document.update(openapi_document(routes, title="jobscheduler", version=_version()))
        return json_response(document, 200)

    @routes.route(ops.GET)
    async def get_job(job_id: str) -> Response:
        job = await visible_job(deps, calls, job_id)
        return json_response(job_to_json(job, held=await held_text(deps, calls, job)), 200)

    @routes.route(manage_ops.ATTEMPTS)
    async def get_job_attempts(job_id: str) -> Response:
        job = await visible_job(deps, calls, job_id)  # 404, not an empty history
        tenant = current_principal().tenant
        records = await calls.call(deps.store.attempts, job.id, tenant=tenant)
        return json_response(
            {"jobId": job.id, "attempts": [attempt_to_json(a) for a in records]}, 200
        )

    @routes.route(manage_ops.BATCH)
    async def create_jobs_batch() -> Response:
        mimetype = request.mimetype
        if mimetype and mimetype != "application/json" and not mimetype.endswith("+json"):
            raise UnsupportedMediaType("Content-Type must be application/json")
        items = parse_batch_request(await any_json_body())
        principal = current_principal()
        for item in items:
            claim_tenant(item, principal)  # 403 for the whole batch if one names another tenant
        admitted = await tenancy.admit_batch(principal, items)

        async def insert_many(jobs: Sequence[Job]) -> list[InsertOutcome]:
            return await calls.call(deps.store.insert_many, jobs)

        received = normalize_traceparent(request.headers.get(TRACEPARENT))

        async def store(traceparent: str | None) -> tuple[list[dict[str, Any]], list[Job]]:
            return await create_batch(
                insert_many,
                items,
                now=deps.clock.now(),
                job_types=job_types,
                max_attempts_defaults=max_attempts_defaults,
                trace_parent=traceparent,
            )

        if deps.tracing.enabled:
            with deps.tracing.create(manage_ops.BATCH.rule, received) as span:
                answers, created = await store(span.traceparent)
                span.describe(created)
        else:
            answers, created = await store(received)
        tenancy.forget_batch(admitted, created)
        g.audit_detail = f"{len(created)} of {len(items)} jobs created"
        if created and deps.waker is not None:
            deps.waker.notify(min(job.scheduled_at for job in created))
        for job in created:
            log.debug(
                "job created",
                extra={"job_id": job.id, "tenant": job.tenant_id, "job_type": job.job_type},
            )
        log.debug(
            "job batch created",
            extra={
                "jobs": len(items),
                "stored": len(created),
                "rejected": len(items) - len(created),
            },
        )
        return json_response({"results": answers}, 200)


def _version() -> str:
    try:
        return importlib.metadata.version("jobscheduler")
    except importlib.metadata.PackageNotFoundError:
        return "0"
