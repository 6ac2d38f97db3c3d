"""The dashboard's pages: shells rendered here, filled from the JSON API by ``static/ui.js``
(shared helpers) and one script per view (``static/ui_*.js``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from quart import Blueprint, Response, redirect, render_template, request, send_from_directory

from jobscheduler.api.auth import current_principal
from jobscheduler.api.errors import status_of
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import PUBLIC, RouteTable
from jobscheduler.api.schemas.jobs import DESCRIBE_CRON
from jobscheduler.api.schemas.workflows import MAX_WORKFLOW_PAGE
from jobscheduler.api.session import (
    CSRF_FIELD,
    CSRF_HEADER,
    MAX_KEY_LENGTH,
    SESSION_COOKIE,
    KeyVerifier,
    check_csrf,
    csrf_token,
)
from jobscheduler.domain.keys import Principal, Role
from jobscheduler.domain.model import LISTABLE_STATUSES, MAX_STRING_LENGTH, is_job_id
from jobscheduler.errors import Forbidden, Unauthorized, ValidationError
from jobscheduler.roles.deps import Deps

from ._chart import statuses_of
from ._filters import PAGE_SIZES, SORT_CHOICES, parse_jobs_filter
from ._words import describe_cron

log = logging.getLogger(__name__)

#: Stylesheet and script, served at /ui/static/ (package data).
STATIC_DIR = Path(__file__).parent / "static"

#: How many of a tenant's templates the Cron view lists (one API page).
SCAN_LIMIT = 1000
#: Dead letters grouped per page: the view groups the newest page and reads one more page
#: of older ones each time "Show older" is pressed (a page of 250 stays well inside the
#: 200 ms page budget on FerretDB, where 1,000 documents took 300-550 ms).
DEAD_LETTER_PAGE = 250


def _can_act(principal: Principal) -> bool:
    return principal.role.rank >= Role.WRITER.rank


def viewed_tenant(principal: Principal, requested: str | None) -> str | None:
    """The tenant a page looks at: the key's own, else the one the query names (``tenantId``),
    else None: every tenant (only a principal that sees every tenant gets there)."""
    if principal.tenant is not None:
        return principal.tenant
    return (requested or "").strip()[:MAX_STRING_LENGTH] or None


def _page_context(active: str, refresh_seconds: float) -> dict[str, Any]:
    principal = current_principal()
    key = request.cookies.get(SESSION_COOKIE)
    tenant = viewed_tenant(principal, request.args.get("tenantId"))
    return {
        "active": active,
        "principal": principal,
        # The tenant looked at (None: every tenant); a key bound to one cannot change it.
        "tenant": tenant,
        "all_tenants": tenant is None,
        "tenant_locked": principal.tenant is not None,
        "can_act": _can_act(principal),
        "signed_in": bool(key),
        "csrf": csrf_token(key) if key else "",
        "csrf_field": CSRF_FIELD,
        "csrf_header": CSRF_HEADER,
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


def _same_origin() -> bool:
    """False for a form posted from another site (its ``Origin`` names another host).

    Hosts are compared, not schemes: behind a proxy that ends TLS the page is https while
    the request reaching us is http.
    """
    origin = request.headers.get("Origin")
    return origin is None or urlsplit(origin).netloc == request.host


def _see_other(location: str) -> Response:
    response: Response = redirect(location, 303)  # type: ignore[assignment]
    return response


def register_ui_routes(
    routes: RouteTable,
    deps: Deps,
    verify_key: KeyVerifier | None = None,
) -> None:
    """Serve the dashboard at ``/ui`` (pages and ``/ui/static/...``) and redirect ``/``.

    ``verify_key`` checks a key typed into the sign-in form (the principal, or Unauthorized);
    None while authentication is off: then there is nothing to sign in to and the pages
    open directly. Every page is declared in ``routes`` with the role it needs; the page
    helper ``/ui/describe`` answers JSON and is an operation of the API's document.
    """
    app = routes.app
    refresh = deps.settings.ui_refresh
    ui = Blueprint(
        "ui",
        __name__,
        url_prefix="/ui",
        template_folder="templates",
    )

    # Our own route rather than the blueprint's static folder: a plain view function that
    # the route table can declare public (the sign-in page needs its stylesheet).
    @routes.page("/static/<path:filename>", role=PUBLIC, blueprint=ui)
    async def static(filename: str) -> Response:
        response = await send_from_directory(STATIC_DIR, filename)
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    @routes.page("", role=Role.READER, blueprint=ui)
    @routes.page("/", role=Role.READER, blueprint=ui)
    async def overview() -> Response:
        # A shell: static/overview.js fills it from GET /stats/overview (the API's own scope
        # rules apply). A principal that sees every tenant may pick one with the switcher.
        principal = current_principal()
        context = _page_context("overview", refresh)
        api_url = "/stats/overview"
        if principal.tenant is None and context["tenant"] is not None:
            api_url += "?" + urlencode({"tenantId": context["tenant"]})
        body = await render_template(
            "overview.html",
            **context,
            api_url=api_url,
            statuses=statuses_of({}),
            cluster_visible=principal.tenant is None,
        )
        return _html(body)

    @routes.page("/jobs", role=Role.READER, blueprint=ui)
    async def jobs() -> Response:
        context = _page_context("jobs", refresh)
        filters = parse_jobs_filter(request.args, context["tenant"], LISTABLE_STATUSES)
        body = await render_template(
            "jobs.html",
            **context,
            f=filters,
            api_query=urlencode(filters.api_params()),
            bulk_filter=json.dumps(filters.bulk_filter()),
            statuses=LISTABLE_STATUSES,
            page_sizes=PAGE_SIZES,
            sorts=SORT_CHOICES,
        )
        return _html(body)

    async def tenant_page(template: str, active: str, scan_limit: int = SCAN_LIMIT) -> Response:
        body = await render_template(
            template, **_page_context(active, refresh), scan_limit=scan_limit
        )
        return _html(body)

    @routes.page("/dead-letters", role=Role.READER, blueprint=ui)
    async def dead_letters() -> Response:
        # ``?limit=`` picks the page size (1-1000); anything else is the default.
        raw = request.args.get("limit", "")
        size = int(raw) if raw.isdigit() and 1 <= int(raw) <= SCAN_LIMIT else DEAD_LETTER_PAGE
        return await tenant_page("dead_letters.html", "dead-letters", size)

    @routes.page("/cron", role=Role.READER, blueprint=ui)
    async def cron_templates() -> Response:
        return await tenant_page("cron.html", "cron")

    @routes.page("/jobs/<job_id>", role=Role.READER, blueprint=ui)
    async def job_detail(job_id: str) -> Response:
        job_id = job_id.lower()
        if not is_job_id(job_id):
            body = await render_template(
                "error.html",
                **_page_context("jobs", refresh),
                message="A job id is 24 hexadecimal characters.",
            )
            return _html(body, status_of(ValidationError))
        body = await render_template("job.html", **_page_context("jobs", refresh), job_id=job_id)
        return _html(body)

    @routes.page("/workflows", role=Role.READER, blueprint=ui)
    async def workflows() -> Response:
        # The newest page of GET /workflows (its largest).
        return await tenant_page("workflows.html", "workflows", MAX_WORKFLOW_PAGE)

    @routes.page("/workflows/<workflow_id>", role=Role.READER, blueprint=ui)
    async def workflow_detail(workflow_id: str) -> Response:
        # A shell: static/ui_dag.js draws the DAG from GET /workflows/{id}, whose
        # tenant scope answers another tenant's workflow as a missing one.
        workflow_id = workflow_id.lower()
        context = _page_context("workflows", refresh)
        if not is_job_id(workflow_id):
            message = "A workflow id is 24 hexadecimal characters."
            body = await render_template("error.html", **context, message=message)
            return _html(body, status_of(ValidationError))
        body = await render_template("workflow.html", **context, workflow_id=workflow_id)
        return _html(body)

    @routes.route(DESCRIBE_CRON, blueprint=ui)
    async def describe() -> Response:
        # A page helper: a cron expression in words (the script shows it beside the template).
        words = describe_cron(request.args.get("cron", ""), request.args.get("timezone"))
        return json_response({"text": words}, 200)

    @routes.page("/signin", role=PUBLIC, blueprint=ui)
    async def signin_form() -> Response:
        if verify_key is None:
            return _see_other("/ui")
        body = await render_template("signin.html", **_page_context("signin", refresh), error="")
        return _html(body)

    @routes.page("/signin", role=PUBLIC, methods=("POST",), blueprint=ui)
    async def signin() -> Response:
        if verify_key is None:
            return _see_other("/ui")
        context = _page_context("signin", refresh)
        if not _same_origin():
            body = await render_template("signin.html", **context, error="Sign in from this site.")
            return _html(body, status_of(Forbidden))
        form = await request.form
        key = (form.get("key") or "").strip()
        if not key or len(key) > MAX_KEY_LENGTH:
            body = await render_template("signin.html", **context, error="Paste an API key.")
            return _html(body, status_of(ValidationError))
        try:
            principal = await verify_key(key)
        except Unauthorized:
            log.info("dashboard sign-in refused")
            error = "That key is not valid (unknown, revoked or mistyped)."
            body = await render_template("signin.html", **context, error=error)
            return _html(body, status_of(Unauthorized))
        log.info(
            "dashboard sign-in",
            extra={
                "key_id": principal.key_id,
                "tenant": principal.tenant,
                "role": principal.role.value,
            },
        )
        response = _see_other("/ui")
        response.set_cookie(
            SESSION_COOKIE,
            key,
            httponly=True,
            samesite="Strict",
            secure=request.scheme == "https",
            path="/",
        )
        return response

    @routes.page("/signout", role=PUBLIC, methods=("POST",), blueprint=ui)
    async def signout() -> Response:
        key = request.cookies.get(SESSION_COOKIE)
        if key:
            check_csrf(key, (await request.form).get(CSRF_FIELD))
        response = _see_other("/ui/signin" if verify_key is not None else "/ui")
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="Strict")
        return response

    @ui.errorhandler(Unauthorized)
    async def _to_signin(exc: Unauthorized) -> Response:
        # A page asked for without a valid session: to the sign-in form, not a JSON 401.
        return _see_other("/ui/signin")

    app.register_blueprint(ui)

    @routes.page("/", role=PUBLIC)
    async def root() -> Response:
        response: Response = redirect("/ui", 302)  # type: ignore[assignment]
        return response
