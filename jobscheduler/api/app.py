"""The HTTP API (quart-trio on hypercorn's trio worker): create, get and list jobs.

Successful responses are the raw resource; every error is ``{"error": "..."}`` with the
matching status and a JSON content type. Error classes map to statuses in one table.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import time
from collections.abc import Sequence
from typing import Any, cast

import trio
from quart import Response, g, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from jobscheduler.api.routes.batch import create_batch, parse_batch_request
from jobscheduler.api.routes.create import FAILED, Creator, FastCreate, duplicate_message
from jobscheduler.api.routes.cron import register_cron_routes
from jobscheduler.api.routes.listing import register_listing_routes
from jobscheduler.api.routes.manage import register_manage_routes
from jobscheduler.api.routes.occurrences import register_occurrence_routes
from jobscheduler.api.routes.overview import register_overview_route
from jobscheduler.api.schemas.manage import describe_registered
from jobscheduler.api.serving.server import serve_asgi
from jobscheduler.api.serving.unread_body import ASGIApp
from jobscheduler.domain.attempts import attempt_to_json
from jobscheduler.domain.keys import Role
from jobscheduler.domain.model import Job, is_job_id, job_to_json
from jobscheduler.domain.validation import loads_json_body
from jobscheduler.errors import (
    DuplicateJob,
    Forbidden,
    InvalidTransition,
    JobNotFound,
    JobSchedulerError,
    StoreError,
    Unauthorized,
    UnsupportedMediaType,
    ValidationError,
)
from jobscheduler.roles.deps import Deps
from jobscheduler.store.base import InsertOutcome

from .auth import current_principal, public, requires
from .bounded import BoundedCalls
from .metrics import RequestMetrics
from .route_table import RouteTable, openapi_document
from .schemas import jobs as ops
from .tenancy import admit_batch, claim_tenant, forget_batch, install_tenancy, mark_audited
from .ui import register_ui_routes

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
#: ``Retry-After`` (seconds) of every 503: the store failed or did not answer in time.
RETRY_AFTER_SECONDS = 1

# Project error -> HTTP status. Anything else is a 500 with a generic message.
ERROR_STATUS: dict[type[JobSchedulerError], int] = {
    ValidationError: 400,
    Unauthorized: 401,
    Forbidden: 403,
    JobNotFound: 404,
    DuplicateJob: 409,
    InvalidTransition: 409,
    UnsupportedMediaType: 415,
    StoreError: 503,
}


def _json(body: Any, status: int) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        status=status,
        content_type="application/json",
    )


def error_response(message: str, status: int) -> Response:
    return _json({"error": message}, status)


def create_app(deps: Deps) -> QuartTrio:
    """Build the API app around ``deps`` (no I/O happens here)."""
    app = QuartTrio(__name__, static_folder=None)  # no /static route: every route is declared
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False
    metrics = deps.metrics
    job_types = deps.registry.validators()
    # Every store call of a request is bounded by API_STORE_TIMEOUT (see bounded.py); the
    # calls run in the app's own nursery, which exists while the app serves.
    store_calls = BoundedCalls(deps.settings.api_store_timeout)

    @app.before_serving
    async def _attach_store_calls() -> None:
        store_calls.attach(app.nursery)

    max_attempts_defaults = deps.registry.max_attempts_defaults()
    routes = RouteTable(app)

    @app.before_request
    async def _start_timer() -> None:
        g.started = time.perf_counter()

    tenancy = install_tenancy(app, deps, _json, store_calls)

    request_metrics = RequestMetrics(metrics)

    @app.after_request
    async def _observe(response: Response) -> Response:
        rule = request.url_rule.rule if request.url_rule is not None else "unmatched"
        started: float | None = g.get("started")
        seconds = None if started is None else time.perf_counter() - started
        request_metrics.observe(request.method, rule, response.status_code, seconds)
        return response

    @app.errorhandler(JobSchedulerError)
    async def _project_error(exc: JobSchedulerError) -> Response:
        for cls, status in ERROR_STATUS.items():
            if isinstance(exc, cls):
                if status >= 500:
                    log.error("request failed", extra={"error": str(exc), "path": request.path})
                    response = error_response("job store unavailable, retry later", status)
                    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
                    return response
                return error_response(str(exc), status)
        log.exception("unexpected project error", extra={"path": request.path})
        return error_response("internal error", 500)

    @app.errorhandler(HTTPException)
    async def _http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        messages = {
            404: "not found",
            405: "method not allowed",
            413: f"request body larger than {MAX_BODY_BYTES} bytes",
        }
        return error_response(messages.get(status, exc.description or exc.name), status)

    @app.errorhandler(Exception)
    async def _unexpected(exc: Exception) -> Response:
        log.exception("unhandled error", extra={"path": request.path})
        return error_response("internal error", 500)

    @routes.route(ops.HEALTHZ)
    @public
    async def healthz() -> Response:
        return Response("ok", status=200, content_type="text/plain; charset=utf-8")

    creator = Creator(
        deps=deps,
        tenancy=tenancy,
        calls=store_calls,
        job_types=job_types,
        max_attempts_defaults=max_attempts_defaults,
    )
    create_op = ops.create_operation(job_types)

    @routes.route(create_op)
    @requires(Role.WRITER)
    async def create_job(body: Any) -> Response:
        principal = current_principal()
        job = creator.prepare(principal, body)
        try:
            failed = cast("Exception | None", request.scope.get(FAILED))
            if failed is not None:
                raise failed  # the fast path met it in the quota or the store (create.py)
            stored = await creator.store(principal, job)
        except DuplicateJob as exc:
            # 409 names the job holding the key, so a retrying client can follow it.
            return _json({"error": duplicate_message(job), "jobId": exc.existing_id}, 409)
        mark_audited()
        return _json(job_to_json(stored), 201)

    @app.post("/jobs/batch")
    @requires(Role.WRITER)
    async def create_jobs_batch() -> Response:
        mimetype = request.mimetype
        if mimetype and mimetype != "application/json" and not mimetype.endswith("+json"):
            return error_response("Content-Type must be application/json", 415)
        raw = await request.get_data(cache=False)
        items = parse_batch_request(loads_json_body(raw.encode() if isinstance(raw, str) else raw))
        for item in items:
            claim_tenant(item)  # 403 for the whole batch if one names another tenant
        admitted = await admit_batch(items)

        async def insert_many(jobs: Sequence[Job]) -> list[InsertOutcome]:
            return await store_calls.call(deps.store.insert_many, jobs)

        answers, created = await create_batch(
            insert_many,
            items,
            now=deps.clock.now(),
            job_types=job_types,
            max_attempts_defaults=max_attempts_defaults,
        )
        forget_batch(admitted, created)
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
        return _json({"results": answers}, 200)

    @app.get("/jobs/<job_id>/attempts")
    @requires(Role.READER)
    async def get_job_attempts(job_id: str) -> Response:
        job_id = job_id.lower()
        if not is_job_id(job_id):
            raise ValidationError("id: must be a 24-character hex ObjectId")
        job = await store_calls.call(deps.store.get, job_id)  # 404, not an empty history
        current_principal().check_visible(job.tenant_id, job.id)
        records = await store_calls.call(deps.store.attempts, job_id)
        return _json({"jobId": job_id, "attempts": [attempt_to_json(a) for a in records]}, 200)

    @routes.route(ops.GET)
    @requires(Role.READER)
    async def get_job(job_id: str) -> Response:
        if not is_job_id(job_id.lower()):
            raise ValidationError("id: must be a 24-character hex ObjectId")
        job = await store_calls.call(deps.store.get, job_id.lower())
        current_principal().check_visible(job.tenant_id, job.id)
        return _json(job_to_json(job), 200)

    register_cron_routes(app, deps, _json, store_calls)
    register_occurrence_routes(app, deps, _json, store_calls)
    register_listing_routes(app, deps, _json, store_calls)
    register_overview_route(app, deps, _json, store_calls)
    register_manage_routes(app, deps, _json, store_calls)
    # Sign-in only means something when keys are required (AUTH=off: pages open directly).
    verify_key = tenancy.verify_key if tenancy.auth_required else None
    register_ui_routes(app, deps, store_calls, verify_key=verify_key)
    routes.pages("ui.", "root")  # the dashboard's HTML pages are not part of the JSON API
    describe_registered(routes)  # routes other modules registered with their own validation

    document: dict[str, Any] = {}

    @routes.route(ops.OPENAPI)
    @public
    async def openapi() -> Response:
        if not document:  # built on first use: every module has registered its routes
            document.update(openapi_document(routes, title="jobscheduler", version=_version()))
        return _json(document, 200)

    # The create's fast path (create.py): in front of Quart, so the test client uses it too.
    fast_create = FastCreate(
        cast(ASGIApp, app.asgi_app),
        creator=creator,
        validate=routes.validator(create_op),
        authenticator=tenancy.authenticator if tenancy.auth_required else None,
        metrics=request_metrics,
        max_body=MAX_BODY_BYTES,
    )
    app.asgi_app = cast(Any, fast_create)  # type: ignore[method-assign]
    return app


def _version() -> str:
    try:
        return importlib.metadata.version("jobscheduler")
    except importlib.metadata.PackageNotFoundError:
        return "0"


async def run_api(
    deps: Deps,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The API role: serve until cancelled; ``task_status`` gets the bound addresses."""
    app = create_app(deps)
    await serve_asgi(app, deps.settings.api_host, deps.settings.api_port, task_status=task_status)
