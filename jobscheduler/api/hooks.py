"""The app's request hooks: authentication and the role check before a view, the audit
trail and the request metrics after it, and the one error handler.

- ``before_request``: the caller is authenticated (:meth:`.auth.Gate.caller`; 401 with
  ``WWW-Authenticate: Bearer``), then the role its route declared in the route table is
  checked (403). A route the table does not know is admin-only; a PUBLIC one needs no key.
- ``after_request``: every request whose method changes state and that was authenticated is
  appended to the audit trail (:mod:`.audit`), whatever route it hit.
- errors: every project exception is answered by the one error table (:mod:`.errors`);
  the web framework's own (404, 405, 413) are translated into project exceptions first.
"""

from __future__ import annotations

import logging
import time

from quart import Response, g, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from jobscheduler.domain.keys import Role
from jobscheduler.errors import JobSchedulerError, QuotaExceeded, Unauthorized

from .audit import READ_METHODS, append_record, request_record
from .auth import Credentials, current_principal
from .errors import INTERNAL_ERROR_MESSAGE, from_http, response_of, rule_of
from .metrics import RequestMetrics
from .replies import error_response
from .route_table import PUBLIC, RouteTable
from .tenancy import AUTHENTICATED, Tenancy

log = logging.getLogger(__name__)


def install_hooks(
    app: QuartTrio, routes: RouteTable, tenancy: Tenancy, metrics: RequestMetrics
) -> None:
    """Add the hooks and the error handler to ``app`` (see the module doc)."""

    @app.before_request
    async def _start_timer() -> None:
        g.started = time.perf_counter()

    @app.before_request
    async def _authenticate() -> None:
        rule = request.url_rule
        needed = routes.access(rule.endpoint) if rule is not None else None
        if needed == PUBLIC:
            return
        principal = request.scope.get(AUTHENTICATED)
        if principal is None:
            principal = await tenancy.gate.caller(Credentials.of_request(request))
        g.principal = principal
        if rule is None:
            return  # 404/405 follow, for an authenticated caller only
        current_principal().require(needed if isinstance(needed, Role) else Role.ADMIN)

    @app.after_request
    async def _audit(response: Response) -> Response:
        if request.method in READ_METHODS or response.status_code == 401:
            return response
        if g.get("audited"):
            return response  # written with the job (audit.create_record)
        rule = request.url_rule
        if rule is not None and routes.access(rule.endpoint) == PUBLIC:
            return response
        record = await request_record(tenancy, response)
        if response.status_code >= 500:
            # The store is failing: do not make the client wait a second store timeout;
            # write the record in the background (the app's nursery owns the task).
            app.nursery.start_soon(append_record, tenancy, record)
        else:
            await append_record(tenancy, record)
        return response

    @app.after_request
    async def _observe(response: Response) -> Response:
        rule = request.url_rule.rule if request.url_rule is not None else "unmatched"
        started: float | None = g.get("started")
        seconds = None if started is None else time.perf_counter() - started
        metrics.observe(request.method, rule, response.status_code, seconds)
        return response

    @app.errorhandler(JobSchedulerError)
    async def _project_error(exc: JobSchedulerError) -> Response:
        rule = rule_of(type(exc))
        if rule is None:
            log.exception("unexpected project error", extra={"path": request.path})
        elif isinstance(exc, Unauthorized):
            tenancy.metrics.api_auth_failures.inc()
            log.info("request refused: no valid API key", extra={"path": request.path[:200]})
        elif isinstance(exc, QuotaExceeded):
            principal = current_principal()
            log.info(
                "request refused by a quota",
                extra={
                    "reason": exc.reason,
                    "tenant": principal.tenant,
                    "key_id": principal.key_id,
                },
            )
        elif rule.status >= 500:
            log.error("request failed", extra={"error": str(exc), "path": request.path})
        return response_of(exc)

    @app.errorhandler(HTTPException)
    async def _http_error(exc: HTTPException) -> Response:
        translated = from_http(exc)
        if translated is not None:
            return response_of(translated)
        return error_response(exc.description or exc.name, exc.code or 500)

    @app.errorhandler(Exception)
    async def _unexpected(exc: Exception) -> Response:
        log.exception("unhandled error", extra={"path": request.path})
        return error_response(INTERNAL_ERROR_MESSAGE, 500)
