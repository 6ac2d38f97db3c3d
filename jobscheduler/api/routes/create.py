"""``POST /jobs``: the create of one job, its route, and the fast path that serves it
without Quart.

:class:`Creator` is the create itself, shared by both ways in: :meth:`~Creator.prepare` (the
tenant claim and validation.py's checks: 403, 400; no I/O) and :meth:`~Creator.store` (the quota,
then the insert with its audit record in one store call: 429, 409, 503).

:class:`FastCreate` is ASGI middleware in front of the Quart app (installed as its
``asgi_app``, so the test client goes through it too). The create is the API's hottest
route, and Quart's per-request machinery — request and app contexts, the hook chains, the
response object — cost more than the create's own work (see the docs' Benchmarks
section). The fast path serves a create that succeeds: it reads the body, authenticates with
the API's own gate (:meth:`jobscheduler.api.auth.Gate.caller`, from the key cache only),
checks the role the route declares, validates with the route's own compiled schema, runs the
:class:`Creator`, counts the request in the same metrics and answers 201.

Everything else goes to the Quart app, which answers as it always has — one implementation
of every error, its audit record, its log line and its metrics:

- before any I/O (another content type, a body over the limit, a key that is not cached or
  not valid, a role or tenant refused, a body the schema or validation.py
  refuses): the request is handed over as it came, its body replayed, and Quart redoes the
  checks (they are pure) and answers the error;
- when the quota or the store refuses (429, 409, 503, or an unexpected error): the request is
  handed over with that error in its scope under :data:`FAILED`, and the Quart view raises
  it at the point where it would have happened, without a second store call.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import attrs
from quart import Response, request

from jobscheduler.api.audit import create_record, mark_audited
from jobscheduler.api.auth import Credentials, Gate, current_principal
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.metrics import RequestMetrics
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import Operation, RouteTable
from jobscheduler.api.serving.unread_body import ASGIApp, Message, Receive, Scope, Send
from jobscheduler.api.tenancy import AUTHENTICATED, Tenancy, claim_tenant
from jobscheduler.domain.keys import Principal, Role
from jobscheduler.domain.model import Job, job_to_json
from jobscheduler.domain.validation import PayloadValidator, loads_json_body, parse_create_request
from jobscheduler.errors import DuplicateJob, JobSchedulerError
from jobscheduler.observability.tracecontext import HEADER as TRACEPARENT
from jobscheduler.observability.tracecontext import normalize_traceparent
from jobscheduler.roles.deps import Deps

log = logging.getLogger(__name__)

#: The create's route and its audit action.
METHOD, ROUTE = "POST", "/jobs"
ACTION = f"{METHOD} {ROUTE}"
#: Scope key of the error the fast path met in the quota or the store (see the module doc).
FAILED = "jobscheduler.create_failed"
_JSON_HEADERS = [(b"content-type", b"application/json")]
_TRACEPARENT = TRACEPARENT.encode()


@attrs.frozen(kw_only=True)
class Creator:
    """The create of one job, for a caller already authenticated."""

    deps: Deps
    tenancy: Tenancy
    calls: BoundedCalls
    job_types: Mapping[str, PayloadValidator | None]
    max_attempts_defaults: Mapping[str, int]

    def prepare(self, principal: Principal, body: Any, traceparent: str | None = None) -> Job:
        """The job a validated create body asks for (403 for another tenant, 400 for what
        validation.py refuses), keeping the request's ``traceparent`` if it parses. No I/O."""
        claim_tenant(body, principal)
        job = parse_create_request(
            body,
            now=self.deps.clock.now(),
            job_types=self.job_types,
            max_attempts_defaults=self.max_attempts_defaults,
        )
        if traceparent is not None:
            job = attrs.evolve(job, trace_parent=normalize_traceparent(traceparent))
        return job

    async def store(self, principal: Principal, job: Job) -> Job:
        """Admit ``job`` to the caller's quotas and insert it with its audit record (429,
        409 with the holder of the key, 503); with tracing on, inside the ``job.create``
        span, whose context the job keeps."""
        tracing = self.deps.tracing
        if not tracing.enabled:
            return await self._store(principal, job)
        with tracing.create(ROUTE, job.trace_parent) as span:
            stored = await self._store(principal, attrs.evolve(job, trace_parent=span.traceparent))
            span.describe([stored])
            return stored

    async def _store(self, principal: Principal, job: Job) -> Job:
        await self.tenancy.admit_creates(principal, job.tenant_id, 1)
        record = create_record(principal, job, now=self.deps.clock.now(), action=ACTION)
        try:
            stored = await self.calls.call(self.deps.store.insert, job, audit=record)
        except DuplicateJob:
            self.tenancy.forget_creates(job.tenant_id, 1)
            raise
        if self.deps.waker is not None:
            self.deps.waker.notify(stored.scheduled_at)
        # One line per create only at DEBUG (LOG_LEVEL=DEBUG): at INFO it cost more than
        # the insert. Every create is still counted in api_requests_total and audited.
        log.debug(
            "job created",
            extra={
                "job_id": stored.id,
                "tenant": stored.tenant_id,
                "job_type": stored.job_type,
                "cron": stored.cron,
                "scheduled_at": stored.scheduled_at.isoformat(),
            },
        )
        return stored


def duplicate_message(job: Job) -> str:
    return f"idempotencyKey {job.idempotency_key!r} is already used by another job"


def register_create_route(routes: RouteTable, op: Operation, creator: Creator) -> None:
    """Add ``POST /jobs`` (declared by ``op``) to ``routes``: the way in for every create
    the fast path hands over."""

    @routes.route(op)
    async def create(body: Any) -> Response:
        principal = current_principal()
        job = creator.prepare(principal, body, request.headers.get(TRACEPARENT))
        try:
            failed = cast("Exception | None", request.scope.get(FAILED))
            if failed is not None:
                raise failed  # the fast path met it in the quota or the store
            stored = await creator.store(principal, job)
        except DuplicateJob as exc:
            # 409 names the job holding the key, so a retrying client can follow it.
            raise DuplicateJob(duplicate_message(job), existing_id=exc.existing_id) from None
        mark_audited()
        return json_response(job_to_json(stored), 201)


@attrs.define(eq=False)
class FastCreate:
    """ASGI middleware serving ``POST /jobs`` creates that succeed (see the module doc)."""

    app: ASGIApp
    creator: Creator = attrs.field(kw_only=True)
    validate: Callable[[Any], None] = attrs.field(kw_only=True)
    gate: Gate = attrs.field(kw_only=True)
    #: The role the create's declaration asks for.
    needs: Role = attrs.field(kw_only=True)
    metrics: RequestMetrics = attrs.field(kw_only=True)
    max_body: int = attrs.field(kw_only=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != ROUTE or scope["method"] != METHOD:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        principal = await self._caller(scope)
        if principal is None:
            await self.app(scope, receive, send)
            return
        traceparent = _header(scope, _TRACEPARENT)
        data, complete = await _read_body(receive, self.max_body)
        replay = _replaying(data, complete, receive)

        async def hand_over(failed: Exception | None = None) -> None:
            # The request keeps the principal it was authenticated as: a key whose cache
            # entry expired meanwhile (during a slow store call) is not looked up again.
            handed = {**scope, AUTHENTICATED: principal}
            if failed is not None:
                handed[FAILED] = failed
            await self.app(handed, replay, send)

        if not complete:
            await hand_over()  # too large (413), or the client went away
            return
        try:
            body = loads_json_body(data)
            self.validate(body)
            job = self.creator.prepare(principal, body, traceparent)
        except Exception:
            # Quart answers the 400/403 itself (and an unexpected error with its JSON 500).
            await hand_over()
            return
        try:
            with self.creator.calls.request_budget():
                stored = await self.creator.store(principal, job)
        except Exception as exc:
            await hand_over(exc)
            return
        reply = json.dumps(job_to_json(stored), separators=(",", ":"), ensure_ascii=False)
        content = reply.encode()
        self.metrics.observe(METHOD, ROUTE, 201, time.perf_counter() - started)
        headers = [*_JSON_HEADERS, (b"content-length", str(len(content)).encode())]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        await send({"type": "http.response.body", "body": content, "more_body": False})

    async def _caller(self, scope: Scope) -> Principal | None:
        """The caller, if the fast path may serve this request: a JSON body (by its content
        type), from a caller the gate knows without a store read (a cached key, or anyone
        with authentication off) whose role the route allows. None hands the request to
        Quart, which gives the refusal, if any."""
        for name, value in scope["headers"]:
            if name == b"content-type":
                mimetype = value.partition(b";")[0].strip().lower().decode("latin-1")
                if mimetype and mimetype != "application/json" and not mimetype.endswith("+json"):
                    return None
        try:
            principal = await self.gate.caller(Credentials.of_scope(scope), read_store=False)
        except JobSchedulerError:
            return None
        if principal is None or principal.role.rank < self.needs.rank:
            return None
        return principal


def _header(scope: Scope, name: bytes) -> str | None:
    """The first value of the header ``name`` (lower case), or None."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The request body and whether it is all there: reading stops past ``limit`` bytes, or
    when the client goes away."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True
        if size > limit:
            return b"".join(chunks), False


def _replaying(data: bytes, complete: bool, receive: Receive) -> Receive:
    """A ``receive`` that gives what was read of the body (``data``; all of it when
    ``complete``) as one message, then the messages still to come."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": data, "more_body": not complete}
        return await receive()

    return replay
