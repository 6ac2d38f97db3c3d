"""Tenancy of the HTTP API: who calls (keys), what they may do (roles), how much (quotas),
and what they did (the audit trail). :func:`install_tenancy` wires it into the app.

- ``before_request``: with ``AUTH=required`` the ``Authorization`` header becomes
  ``g.principal`` (401 with ``WWW-Authenticate: Bearer`` otherwise), then the role the route
  declared (:func:`~jobscheduler.api.auth.requires`) is checked (403). A route that declared no
  role is admin-only. With ``AUTH=off`` every caller is the operator.
- ``after_request``: every request whose method changes state (not GET/HEAD/OPTIONS) and that
  was authenticated is appended to the audit trail, whatever route it hit — routes added
  later are audited without their help.
- Quotas: create routes call :func:`admit_creates` (see :mod:`jobscheduler.api.quotas`).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import attrs
import trio
from quart import Response, current_app, g, request
from quart_trio import QuartTrio

from jobscheduler.api.session import session_authorization
from jobscheduler.domain.audit import AuditRecord, new_record
from jobscheduler.domain.keys import Principal, Role
from jobscheduler.domain.model import Job
from jobscheduler.errors import JobSchedulerError, QuotaExceeded, Unauthorized
from jobscheduler.observability.metrics import Metrics
from jobscheduler.roles.deps import Deps

from .auth import PUBLIC, UNAUTHORIZED_MESSAGE, Authenticator, current_principal, declared_role
from .quotas import Quotas

if TYPE_CHECKING:
    from jobscheduler.domain.keys import ApiKey

    from .bounded import BoundedCalls

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger(__name__)

EXTENSION = "jobscheduler.api.tenancy"
#: Scope key of the principal a request was already authenticated as, by the create's fast
#: path (api/create.py) before it handed the request on: not looked up a second time.
AUTHENTICATED = "jobscheduler.principal"
#: Methods that never change state (not audited).
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Longest a reply waits for its audit record to be written. A healthy store takes
#: milliseconds; past this the write goes on in the background (a detached bounded call) and
#: the reply is sent, so a stalled store does not also stall replies on their audit.
AUDIT_WAIT = 0.5
#: Largest JSON reply the audit hook reads to find the job id and tenant it names.
_AUDIT_PEEK_BYTES = 64 * 1024


@attrs.frozen
class Tenancy:
    """What the routes of one app share: the key cache, the quotas, bounded store calls."""

    deps: Deps
    auth_required: bool
    authenticator: Authenticator
    quotas: Quotas
    metrics: Metrics
    calls: BoundedCalls | None = None

    async def call(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """A store call bounded by API_STORE_TIMEOUT (503 when the store does not answer)."""
        if self.calls is None:
            return await fn(*args, **kwargs)
        return await self.calls.call(fn, *args, **kwargs)

    async def admit_creates(self, principal: Principal, tenant: str, count: int) -> None:
        """Charge ``count`` creates for ``tenant`` to ``principal``'s quotas (429 when
        refused)."""
        who = principal.key_id or f"tenant:{tenant}"
        await self.quotas.admit_creates(who=who, tenant=tenant, count=count)

    async def verify_key(self, key: str) -> Principal:
        """The principal of a key typed into the dashboard's sign-in form (Unauthorized for
        an unknown, revoked or malformed key), checked like an ``Authorization`` header."""
        return await self.authenticator.authenticate([f"Bearer {key}"])


def current_tenancy() -> Tenancy:
    tenancy: Tenancy = current_app.extensions[EXTENSION]
    return tenancy


def claim_tenant(body: Any, principal: Principal | None = None) -> None:
    """Fill a create body's ``tenantId`` from the key, or check the one it names (403 for
    another tenant than the key's). Bodies that are not objects are left to validation.
    ``principal`` defaults to the caller of the request being served."""
    if not isinstance(body, dict):
        return
    principal = principal or current_principal()
    requested = body.get("tenantId")
    if requested is None and principal.tenant is not None:
        body["tenantId"] = principal.tenant
    elif isinstance(requested, str):
        principal.scope(requested)


def tenant_args(args: Mapping[str, str]) -> dict[str, str]:
    """Query arguments with ``tenantId`` filled from the key when absent (checked when
    present: 403 for another tenant than the key's)."""
    out = dict(args.items())
    principal = current_principal()
    requested = out.get("tenantId")
    if requested is None and principal.tenant is not None:
        out["tenantId"] = principal.tenant
    elif requested is not None:
        principal.scope(requested)
    return out


async def admit_creates(tenant: str, count: int) -> None:
    """Charge ``count`` creates for ``tenant`` to the caller's quotas (429 when refused)."""
    await current_tenancy().admit_creates(current_principal(), tenant, count)


async def admit_batch(items: Sequence[Any]) -> Counter[str]:
    """Charge a batch's creates (each job counts) to the caller's quotas, per tenant named;
    returns what was admitted (for :func:`forget_batch`). 429 if any tenant is refused."""
    wanted = Counter(
        item["tenantId"]
        for item in items
        if isinstance(item, dict) and isinstance(item.get("tenantId"), str)
    )
    admitted: Counter[str] = Counter()
    try:
        for tenant, count in wanted.items():
            await admit_creates(tenant, count)
            admitted[tenant] = count
    except BaseException:
        forget_batch(admitted, [])
        raise
    return admitted


def forget_batch(admitted: Counter[str], created: Sequence[Job]) -> None:
    """Give back the admitted creates of a batch that were not stored."""
    stored = Counter(job.tenant_id for job in created)
    for tenant, count in admitted.items():
        if count > stored[tenant]:
            forget_creates(tenant, count - stored[tenant])


def forget_creates(tenant: str, count: int) -> None:
    """Creates admitted by :func:`admit_creates` that were not stored after all."""
    current_tenancy().quotas.forget_creates(tenant=tenant, count=count)


def _json_error(message: str, status: int, headers: dict[str, str]) -> Response:
    return Response(
        json.dumps({"error": message}, separators=(",", ":")),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def install_tenancy(
    app: QuartTrio,
    deps: Deps,
    json_response: Callable[..., Response],
    store_calls: BoundedCalls | None = None,
    *,
    register_routes: bool = True,
) -> Tenancy:
    """Add authentication, role checks, quotas and the audit trail to ``app`` (and the
    ``/keys`` and ``/audit`` routes). Call it right after creating the app; its store calls
    go through ``store_calls`` (bounded) when given."""
    settings = deps.settings
    metrics = deps.metrics

    async def get_key(key_id: str) -> ApiKey | None:
        return await tenancy.call(deps.store.get_key, key_id)

    async def count_unfinished(tenant: str) -> int:
        return await tenancy.call(deps.store.count_unfinished, tenant)

    tenancy = Tenancy(
        deps=deps,
        auth_required=settings.auth == "required",
        authenticator=Authenticator(
            _KeyLookup(get_key), ttl=settings.key_cache_ttl, timer=trio.current_time
        ),
        calls=store_calls,
        quotas=Quotas(
            count_unfinished=count_unfinished,
            max_unfinished=settings.quota_max_unfinished,
            create_rate=settings.quota_create_rate,
            create_burst=settings.quota_create_burst,
            on_reject=lambda reason: metrics.api_quota_rejections.labels(reason=reason).inc(),
        ),
        metrics=metrics,
    )
    app.extensions[EXTENSION] = tenancy

    @app.before_request
    async def _authenticate() -> None:
        rule = request.url_rule
        view = app.view_functions.get(rule.endpoint) if rule is not None else None
        needed = declared_role(view)
        if needed == PUBLIC:
            return
        if tenancy.auth_required:
            g.principal = request.scope.get(AUTHENTICATED) or await _authenticate_request()
        if rule is None:
            return  # 404/405 follow, for an authenticated caller only
        current_principal().require(needed if isinstance(needed, Role) else Role.ADMIN)

    async def _authenticate_request() -> Principal:
        headers = request.headers.getlist("Authorization")
        if not headers:
            # The dashboard's sign-in cookie stands for the key it holds; a write through it
            # needs the session's CSRF header (403 otherwise).
            # (werkzeug's Headers: a case-insensitive mapping, typed as its own class)
            request_headers = cast(Mapping[str, str], request.headers)
            headers = session_authorization(request.cookies, request_headers, request.method)
        return await tenancy.authenticator.authenticate(headers)

    @app.errorhandler(Unauthorized)
    async def _unauthorized(exc: Unauthorized) -> Response:
        metrics.api_auth_failures.inc()
        log.info("request refused: no valid API key", extra={"path": request.path[:200]})
        return _json_error(UNAUTHORIZED_MESSAGE, 401, {"WWW-Authenticate": "Bearer"})

    @app.errorhandler(QuotaExceeded)
    async def _quota(exc: QuotaExceeded) -> Response:
        principal = current_principal()
        log.info(
            "request refused by a quota",
            extra={"reason": exc.reason, "tenant": principal.tenant, "key_id": principal.key_id},
        )
        return _json_error(str(exc), 429, {"Retry-After": str(exc.retry_after)})

    @app.after_request
    async def _audit(response: Response) -> Response:
        if request.method in READ_METHODS or response.status_code == 401:
            return response
        if g.get("audited"):
            return response  # written with the job (create_record)
        if declared_role(_view(app)) == PUBLIC:
            return response
        record = await request_record(tenancy, response)
        if response.status_code >= 500:
            # The store is failing: do not make the client wait a second store timeout;
            # write the record in the background (the app's nursery owns the task).
            app.nursery.start_soon(append_record, tenancy, record)
        else:
            await append_record(tenancy, record)
        return response

    if register_routes:
        from jobscheduler.api.routes.tenancy import register_tenancy_routes

        register_tenancy_routes(app, deps, json_response)
    return tenancy


@attrs.frozen
class _KeyLookup:
    lookup: Callable[[str], Awaitable[ApiKey | None]]

    async def get_key(self, key_id: str) -> ApiKey | None:
        return await self.lookup(key_id)


def _view(app: QuartTrio) -> Callable[..., Any] | None:
    rule = request.url_rule
    return app.view_functions.get(rule.endpoint) if rule is not None else None


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
