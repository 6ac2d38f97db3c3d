"""The HTTP API (quart-trio on hypercorn's trio worker): :func:`create_app` assembles it.

Successful responses are the raw resource; every error is ``{"error": "..."}`` with the
matching status and a JSON content type. Every route is declared once in the route table
(:mod:`.route_table`, declarations in :mod:`.schemas`), and every error maps to its status
in one table (:mod:`.errors`).
"""

from __future__ import annotations

from typing import Any, cast

import trio
from quart_trio import QuartTrio

from jobscheduler.roles.deps import Deps

from .bounded import BoundedCalls
from .errors import MAX_BODY_BYTES
from .hooks import install_hooks
from .metrics import RequestMetrics
from .route_table import RouteTable
from .routes.create import Creator, FastCreate, register_create_route
from .routes.cron import register_cron_routes
from .routes.flow import register_flow_routes
from .routes.jobs import register_job_routes
from .routes.listing import register_listing_routes
from .routes.manage import register_manage_routes
from .routes.occurrences import register_occurrence_routes
from .routes.overview import register_overview_route
from .routes.retention import register_retention_routes
from .routes.tenancy import register_tenancy_routes
from .routes.webhooks import register_webhook_routes
from .routes.workflows import register_workflow_routes
from .schemas import jobs as ops
from .serving.server import serve_asgi
from .serving.unread_body import ASGIApp
from .tenancy import Tenancy
from .ui import register_ui_routes

#: Where :func:`tenancy_of` finds an app's tenancy (tests warm its key cache through it).
TENANCY = "jobscheduler.api.tenancy"


def create_app(deps: Deps) -> QuartTrio:
    """Build the API app around ``deps`` (no I/O happens here)."""
    app = QuartTrio(__name__, static_folder=None)  # no /static route: every route is declared
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False
    # Every store call of a request is bounded by API_STORE_TIMEOUT (see bounded.py); the
    # calls run in the app's own nursery, which exists while the app serves.
    calls = BoundedCalls(deps.settings.api_store_timeout)

    @app.before_serving
    async def _attach_store_calls() -> None:
        calls.attach(app.nursery)

    routes = RouteTable(app)
    tenancy = Tenancy.build(deps, calls)
    app.extensions[TENANCY] = tenancy
    request_metrics = RequestMetrics(deps.metrics)
    install_hooks(app, routes, tenancy, request_metrics)

    creator = Creator(
        deps=deps,
        tenancy=tenancy,
        calls=calls,
        job_types=deps.registry.validators(),
        max_attempts_defaults=deps.registry.max_attempts_defaults(),
    )
    create_op = ops.create_operation(deps.registry.validators())
    register_create_route(routes, create_op, creator)
    register_job_routes(routes, deps, tenancy, calls)
    register_cron_routes(routes, deps, calls)
    register_occurrence_routes(routes, deps, calls)
    register_listing_routes(routes, deps, calls)
    register_overview_route(routes, deps, calls)
    register_manage_routes(routes, deps, calls)
    register_tenancy_routes(routes, tenancy)
    register_workflow_routes(routes, deps, tenancy, calls)
    register_flow_routes(routes, deps, calls)
    register_retention_routes(routes, deps, calls)
    register_webhook_routes(routes, tenancy)
    # Sign-in only means something when keys are required (AUTH=off: pages open directly).
    verify_key = tenancy.verify_key if tenancy.auth_required else None
    register_ui_routes(routes, deps, verify_key=verify_key)

    # The create's fast path (create.py): in front of Quart, so the test client uses it too.
    fast_create = FastCreate(
        cast(ASGIApp, app.asgi_app),
        creator=creator,
        validate=routes.validator(create_op),
        gate=tenancy.gate,
        needs=cast("Any", create_op.role),
        metrics=request_metrics,
        max_body=MAX_BODY_BYTES,
    )
    app.asgi_app = cast(Any, fast_create)  # type: ignore[method-assign]
    return app


def tenancy_of(app: QuartTrio) -> Tenancy:
    """The tenancy of an app built by :func:`create_app`."""
    tenancy: Tenancy = app.extensions[TENANCY]
    return tenancy


async def run_api(
    deps: Deps,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The API role: serve until cancelled; ``task_status`` gets the bound addresses."""
    app = create_app(deps)
    await serve_asgi(app, deps.settings.api_host, deps.settings.api_port, task_status=task_status)
