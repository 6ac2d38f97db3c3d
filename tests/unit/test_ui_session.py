"""The dashboard's sign-in session: cookie attributes, CSRF on every write, roles on pages.

Tenancy's key check is stood in for by ``verify`` (two known keys, a reader's and a
writer's) and its ``before_request`` by ``authenticate`` below, which accepts the cookie the
way the API's authentication step does once keys land: through ``session_authorization``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from quart import Response, g, request
from quart_trio import QuartTrio

from jobscheduler.api.auth import current_principal
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.session import (
    CSRF_HEADER,
    SESSION_COOKIE,
    csrf_token,
    session_authorization,
)
from jobscheduler.api.ui import register_ui_routes
from jobscheduler.domain.keys import Principal, Role
from jobscheduler.errors import Forbidden, Unauthorized

from .conftest import DepsFactory

READER_KEY = "jsk_" + "a" * 16 + "_reader"
WRITER_KEY = "jsk_" + "b" * 16 + "_writer"
PRINCIPALS = {
    READER_KEY: Principal(key_id="a" * 16, tenant="acme", role=Role.READER),
    WRITER_KEY: Principal(key_id="b" * 16, tenant="acme", role=Role.WRITER),
}


async def verify(key: str) -> Principal:
    try:
        return PRINCIPALS[key]
    except KeyError:
        raise Unauthorized("missing or invalid API key") from None


@pytest.fixture
async def client(make_deps: DepsFactory) -> AsyncIterator[Any]:
    app = QuartTrio(__name__)

    @app.before_request
    async def authenticate() -> None:
        if request.path in ("/ui/signin", "/ui/signout") or request.path.startswith("/ui/static"):
            return
        headers = request.headers.getlist("Authorization") or session_authorization(
            request.cookies, request.headers, request.method
        )
        if not headers:
            raise Unauthorized("missing or invalid API key")
        g.principal = await verify(headers[0].removeprefix("Bearer "))

    @app.post("/jobs/<job_id>/cancel")
    async def cancel(job_id: str) -> Response:
        current_principal().require(Role.WRITER)
        return Response('{"status":"cancelled"}', content_type="application/json")

    @app.errorhandler(Forbidden)
    async def forbidden(exc: Forbidden) -> Response:
        return Response(str(exc), status=403)

    @app.errorhandler(Unauthorized)
    async def unauthorized(exc: Unauthorized) -> Response:
        return Response(str(exc), status=401)

    register_ui_routes(RouteTable(app), make_deps(), verify_key=verify)
    async with app.test_app() as test_app:
        yield test_app.test_client()


async def sign_in(client: Any, key: str) -> Any:
    return await client.post("/ui/signin", form={"key": key})


def test_csrf_token_depends_on_the_key() -> None:
    assert csrf_token(READER_KEY) == csrf_token(READER_KEY)
    assert csrf_token(READER_KEY) != csrf_token(WRITER_KEY)
    assert READER_KEY not in csrf_token(READER_KEY)


def test_session_authorization_needs_the_csrf_token_for_writes_only() -> None:
    cookies = {SESSION_COOKIE: WRITER_KEY}
    assert session_authorization({}, {}, "POST") == []
    assert session_authorization(cookies, {}, "GET") == [f"Bearer {WRITER_KEY}"]
    with pytest.raises(Forbidden, match="CSRF"):
        session_authorization(cookies, {}, "POST")
    with pytest.raises(Forbidden, match="CSRF"):
        session_authorization(cookies, {CSRF_HEADER: csrf_token(READER_KEY)}, "DELETE")
    good = {CSRF_HEADER: csrf_token(WRITER_KEY)}
    assert session_authorization(cookies, good, "POST") == [f"Bearer {WRITER_KEY}"]


async def test_a_page_without_a_session_goes_to_the_sign_in_form(client: Any) -> None:
    response = await client.get("/ui/jobs")
    assert response.status_code == 303
    assert response.headers["Location"] == "/ui/signin"
    form = await client.get("/ui/signin")
    assert form.status_code == 200
    assert 'type="password"' in await form.get_data(as_text=True)


async def test_sign_in_sets_an_httponly_samesite_strict_cookie(client: Any) -> None:
    response = await sign_in(client, WRITER_KEY)
    assert response.status_code == 303
    assert response.headers["Location"] == "/ui"
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}={WRITER_KEY};")
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert "Path=/" in cookie


async def test_an_unknown_key_is_refused_and_sets_no_cookie(client: Any) -> None:
    response = await sign_in(client, "jsk_nope")
    assert response.status_code == 401
    assert "Set-Cookie" not in response.headers
    assert "not valid" in await response.get_data(as_text=True)


async def test_a_sign_in_posted_from_another_site_is_refused(client: Any) -> None:
    response = await client.post(
        "/ui/signin", form={"key": WRITER_KEY}, headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403
    assert "Set-Cookie" not in response.headers


async def test_a_writer_sees_action_buttons_and_the_pages_csrf_token(client: Any) -> None:
    await sign_in(client, WRITER_KEY)
    page = await (await client.get("/ui/jobs/" + "c" * 24)).get_data(as_text=True)
    assert 'data-action="cancel"' in page
    assert f'content="{csrf_token(WRITER_KEY)}"' in page


async def test_a_reader_sees_no_action_buttons_and_its_forged_write_is_refused(
    client: Any,
) -> None:
    await sign_in(client, READER_KEY)
    page = await (await client.get("/ui/jobs/" + "c" * 24)).get_data(as_text=True)
    assert "data-action" not in page
    # Forged with the right CSRF token: the role still refuses it.
    forged = await client.post(
        "/jobs/" + "c" * 24 + "/cancel", headers={CSRF_HEADER: csrf_token(READER_KEY)}
    )
    assert forged.status_code == 403


async def test_a_write_with_the_cookie_but_no_csrf_token_is_refused(client: Any) -> None:
    await sign_in(client, WRITER_KEY)
    refused = await client.post("/jobs/" + "c" * 24 + "/cancel")
    assert refused.status_code == 403
    allowed = await client.post(
        "/jobs/" + "c" * 24 + "/cancel", headers={CSRF_HEADER: csrf_token(WRITER_KEY)}
    )
    assert allowed.status_code == 200


async def test_sign_out_needs_the_csrf_token_and_forgets_the_key(client: Any) -> None:
    await sign_in(client, WRITER_KEY)
    refused = await client.post("/ui/signout", form={})
    assert refused.status_code == 403
    response = await client.post("/ui/signout", form={"csrf": csrf_token(WRITER_KEY)})
    assert response.status_code == 303
    assert response.headers["Set-Cookie"].startswith(f"{SESSION_COOKIE}=;")
    assert (await client.get("/ui")).status_code == 303


async def test_a_sign_in_through_a_tls_proxy_counts_as_same_site(client: Any) -> None:
    # The browser says https; the request reaching the API behind the proxy is http.
    response = await client.post(
        "/ui/signin", form={"key": WRITER_KEY}, headers={"Origin": "https://localhost"}
    )
    assert response.status_code == 303
