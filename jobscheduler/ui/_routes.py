"""The dashboard's pages: shells rendered here, filled by ``static/ui.js`` from the JSON API."""

from __future__ import annotations

import logging
from typing import Any

from quart import Blueprint, Response, redirect, render_template, request
from quart_trio import QuartTrio

from ..auth import Principal, Role, current_principal
from ..bounded import BoundedCalls
from ..model import LISTABLE_STATUSES, is_job_id
from ..runtime import Deps
from ._chart import status_bars

log = logging.getLogger(__name__)

#: Rows per page of the Jobs table, and the choices offered.
DEFAULT_PAGE_SIZE = 50
PAGE_SIZES = (25, 50, 100, 200)
#: The tenant the Jobs view opens on when the caller is not bound to one.
DEFAULT_TENANT = "default"


def _can_act(principal: Principal) -> bool:
    return principal.role.rank >= Role.WRITER.rank


def _page_context(active: str, refresh_seconds: float) -> dict[str, Any]:
    principal = current_principal()
    return {
        "active": active,
        "principal": principal,
        "can_act": _can_act(principal),
        # The script reads it from the page (settings UI_REFRESH).
        "refresh_seconds": f"{refresh_seconds:g}",
    }


def _html(body: str, status: int = 200) -> Response:
    response = Response(body, status=status, content_type="text/html; charset=utf-8")
    # Pages carry no secrets but must not be framed or sniffed; scripts only from us.
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'"
    )
    response.headers["Cache-Control"] = "no-store"
    return response


def register_ui_routes(app: QuartTrio, deps: Deps, store_calls: BoundedCalls) -> None:
    """Serve the dashboard at ``/ui`` (pages and ``/ui/static/...``) and redirect ``/``."""
    refresh = deps.settings.ui_refresh
    ui = Blueprint(
        "ui",
        __name__,
        url_prefix="/ui",
        template_folder="templates",
        static_folder="static",
        static_url_path="/static",
    )

    @ui.get("")
    @ui.get("/")
    async def overview() -> Response:
        principal = current_principal()
        counts: dict[str, int] | None = None
        if principal.tenant is None:
            # Every tenant's counts: only for a principal that sees every tenant.
            by_status = await store_calls.call(deps.store.count_by_status)
            counts = {status.value: count for status, count in by_status.items()}
        context = _page_context("overview", refresh)
        body = await render_template(
            "overview.html",
            **context,
            counts=counts,
            total=sum(counts.values()) if counts is not None else None,
            chart=status_bars(counts) if counts is not None else "",
        )
        return _html(body)

    @ui.get("/jobs")
    async def jobs() -> Response:
        principal = current_principal()
        args = request.args
        tenant = principal.tenant or args.get("tenantId") or DEFAULT_TENANT
        status = args.get("status", "")
        if status not in LISTABLE_STATUSES:
            status = ""
        try:
            limit = int(args.get("limit", DEFAULT_PAGE_SIZE))
        except ValueError:
            limit = DEFAULT_PAGE_SIZE
        if limit not in PAGE_SIZES:
            limit = DEFAULT_PAGE_SIZE
        body = await render_template(
            "jobs.html",
            **_page_context("jobs", refresh),
            tenant=tenant,
            tenant_locked=principal.tenant is not None,
            status=status,
            statuses=LISTABLE_STATUSES,
            limit=limit,
            page_sizes=PAGE_SIZES,
        )
        return _html(body)

    @ui.get("/jobs/<job_id>")
    async def job_detail(job_id: str) -> Response:
        job_id = job_id.lower()
        if not is_job_id(job_id):
            body = await render_template(
                "error.html",
                **_page_context("jobs", refresh),
                message="A job id is 24 hexadecimal characters.",
            )
            return _html(body, 400)
        body = await render_template("job.html", **_page_context("jobs", refresh), job_id=job_id)
        return _html(body)

    app.register_blueprint(ui)

    @app.get("/")
    async def root() -> Response:
        response: Response = redirect("/ui", 302)  # type: ignore[assignment]
        return response
