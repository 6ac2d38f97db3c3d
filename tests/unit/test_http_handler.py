"""The built-in ``http`` handler against a real server on 127.0.0.1 (named by the allowlist):
what a success returns and sends, which failures are retried and which are permanent, and its
place in the default registry. Every test dials through a recording network backend that only
lets loopback connections through."""

from __future__ import annotations

import json
import ssl
from typing import Any

import pytest
import trustme

from jobscheduler.config import Settings
from jobscheduler.errors import HandlerError, PermanentError
from jobscheduler.handlers import default_registry
from tests.support.http_echo import BIG_BODY, EchoServer, echo_server

from .http_handler_support import (
    FakeResolver,
    RecordingBackend,
    backend_fixture,  # noqa: F401  (registers the fixture)
    closed_port,
    ctx,
    make_handler,
    redirect,
    server_fixture,  # noqa: F401  (registers the fixture)
)

# ----------------------------------------------------------------------- success


async def test_success_returns_status_a_few_headers_and_the_body(
    server: EchoServer, backend: RecordingBackend
) -> None:
    result = await make_handler(backend).run(ctx(url=f"{server.base}/echo?x=1", json={"a": 1}))
    (seen,) = server.requests
    assert result["status"] == 200
    assert result["truncated"] is False
    assert result["headers"] == {
        "content-type": "application/json",
        "content-length": str(len(result["body"].encode())),
    }
    assert json.loads(result["body"]) == seen  # the echo of what the server received
    assert seen["method"] == "POST"  # the default method
    assert seen["query"] == "x=1"
    assert seen["headers"]["content-type"] == "application/json"
    assert seen["body"] == '{"a":1}'
    assert backend.connects == [("127.0.0.1", server.port)]


async def test_method_headers_and_text_body_are_sent_as_given(
    server: EchoServer, backend: RecordingBackend
) -> None:
    await make_handler(backend).run(
        ctx(
            url=f"{server.base}/echo",
            method="put",
            headers={"X-Token": "s3cret", "Content-Type": "text/plain"},
            body="hello",
        )
    )
    (seen,) = server.requests
    assert seen["method"] == "PUT"
    assert seen["headers"]["x-token"] == "s3cret"
    assert seen["headers"]["user-agent"] == "jobscheduler-http"
    assert seen["headers"]["accept-encoding"] == "identity"
    assert seen["headers"]["content-type"] == "text/plain"
    assert seen["body"] == "hello"


async def test_the_vetted_address_is_dialled_while_host_header_keeps_the_name(
    server: EchoServer, backend: RecordingBackend
) -> None:
    resolver = FakeResolver({"hooks.test": ["127.0.0.1"]})
    handler = make_handler(backend, allow=["hooks.test"], resolver=resolver)
    result = await handler.run(ctx(url=f"http://hooks.test:{server.port}/echo", method="GET"))
    assert result["status"] == 200
    # One lookup, by the guard; the connection went to the address it checked.
    assert resolver.calls == ["hooks.test"]
    assert backend.connects == [("127.0.0.1", server.port)]
    assert server.requests[0]["headers"]["host"] == f"hooks.test:{server.port}"


async def test_when_one_vetted_address_refuses_the_next_one_is_tried(
    server: EchoServer, backend: RecordingBackend
) -> None:
    # The server listens on 127.0.0.1 only: 127.0.0.2 (also loopback) refuses the connection.
    resolver = FakeResolver({"multi.test": ["127.0.0.2", "127.0.0.1"]})
    handler = make_handler(backend, allow=["multi.test"], resolver=resolver)
    result = await handler.run(ctx(url=f"http://multi.test:{server.port}/echo"))
    assert result["status"] == 200
    assert backend.connects == [("127.0.0.2", server.port), ("127.0.0.1", server.port)]


async def test_the_body_in_the_result_is_the_first_4_kib_as_text(
    server: EchoServer, backend: RecordingBackend
) -> None:
    result = await make_handler(backend).run(ctx(url=f"{server.base}/big", method="GET"))
    assert result["truncated"] is True
    # 4,096 bytes end inside a 2-byte character: it is dropped, not garbled.
    assert result["body"] == BIG_BODY[:4095].decode()
    assert result["headers"]["content-type"] == "text/plain; charset=utf-8"


@pytest.mark.parametrize(("status", "expect"), [(404, 404), (202, [200, 202]), (204, 204)])
async def test_expect_status_makes_exactly_those_statuses_success(
    server: EchoServer, backend: RecordingBackend, status: int, expect: Any
) -> None:
    result = await make_handler(backend).run(
        ctx(url=f"{server.base}/status/{status}", expectStatus=expect)
    )
    assert result["status"] == status


async def test_https_dials_the_vetted_address_but_verifies_the_certificate_for_the_name(
    backend: RecordingBackend,
) -> None:
    ca = trustme.CA()
    client_tls = ssl.create_default_context()
    ca.configure_trust(client_tls)
    resolver = FakeResolver({"hooks.test": ["127.0.0.1"], "wrong.test": ["127.0.0.1"]})
    handler = make_handler(backend, allow=["hooks.test", "wrong.test"], resolver=resolver)
    handler.ssl_context = client_tls
    # The certificate names hooks.test only (not 127.0.0.1): verification passes only if
    # SNI and the hostname check use the URL's name while the socket goes to the address.
    async with echo_server(tls=ca.issue_cert("hooks.test")) as server:
        result = await handler.run(ctx(url=f"https://hooks.test:{server.port}/echo"))
        assert result["status"] == 200
        assert server.requests[0]["headers"]["host"] == f"hooks.test:{server.port}"
        with pytest.raises(HandlerError, match="CERTIFICATE_VERIFY_FAILED"):
            await handler.run(ctx(url=f"https://wrong.test:{server.port}/echo"))
        assert len(server.requests) == 1
    assert backend.connects == [("127.0.0.1", server.port)] * 2


# ----------------------------------------------------------------------- failures


@pytest.mark.parametrize("status", [500, 502, 503, 408, 429])
async def test_server_errors_408_and_429_are_retried_attempts(
    server: EchoServer, backend: RecordingBackend, status: int
) -> None:
    with pytest.raises(HandlerError, match=f"answered {status}") as info:
        await make_handler(backend).run(ctx(url=f"{server.base}/status/{status}"))
    assert not isinstance(info.value, PermanentError)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422])
async def test_other_client_errors_are_permanent(
    server: EchoServer, backend: RecordingBackend, status: int
) -> None:
    with pytest.raises(PermanentError, match=f"answered {status}"):
        await make_handler(backend).run(ctx(url=f"{server.base}/status/{status}"))


async def test_a_success_status_not_in_expect_status_is_permanent(
    server: EchoServer, backend: RecordingBackend
) -> None:
    with pytest.raises(PermanentError, match="answered 200"):
        await make_handler(backend).run(ctx(url=f"{server.base}/echo", expectStatus=[201]))


async def test_a_server_error_not_in_expect_status_is_still_retried(
    server: EchoServer, backend: RecordingBackend
) -> None:
    with pytest.raises(HandlerError) as info:
        await make_handler(backend).run(ctx(url=f"{server.base}/status/503", expectStatus=201))
    assert not isinstance(info.value, PermanentError)


async def test_a_request_past_timeout_ms_is_a_retried_attempt(
    server: EchoServer, backend: RecordingBackend
) -> None:
    with pytest.raises(HandlerError, match="timed out after 200 ms") as info:
        await make_handler(backend).run(ctx(url=f"{server.base}/hang", timeoutMs=200))
    assert not isinstance(info.value, PermanentError)
    assert [r["path"] for r in server.requests] == ["/hang"]


async def test_a_refused_connection_is_a_retried_attempt(backend: RecordingBackend) -> None:
    port = closed_port()
    with pytest.raises(HandlerError, match="ConnectError") as info:
        await make_handler(backend).run(ctx(url=f"http://127.0.0.1:{port}/"))
    assert not isinstance(info.value, PermanentError)
    assert backend.connects == [("127.0.0.1", port)]


async def test_an_unresolvable_name_is_a_retried_attempt(backend: RecordingBackend) -> None:
    with pytest.raises(HandlerError, match="cannot resolve") as info:
        await make_handler(backend).run(ctx(url="http://nowhere.test/"))
    assert not isinstance(info.value, PermanentError)
    assert backend.connects == []


async def test_an_invalid_payload_reaching_the_handler_is_permanent(
    backend: RecordingBackend,
) -> None:
    with pytest.raises(PermanentError, match="invalid payload"):
        await make_handler(backend).run(ctx(url="ftp://127.0.0.1/"))
    assert backend.connects == []


# ----------------------------------------------------------------------- registration


def test_the_default_registry_holds_http_with_its_validator() -> None:
    registry = default_registry()
    assert "http" in registry
    handler = registry.get("http")
    assert handler.is_async
    assert handler.validate is not None


async def test_settings_configure_the_registry_http_handler(server: EchoServer) -> None:
    configured = default_registry(
        Settings.from_env({"HTTP_ALLOWLIST": "127.0.0.1", "HTTP_FOLLOW_REDIRECTS": "true"})
    )
    job = ctx(url=redirect(server, f"{server.base}/echo"), method="GET")
    await configured.get("http").run(job)
    assert [r["path"] for r in server.requests] == ["/redirect", "/echo"]
    # Without settings: nothing internal is allowed, whatever the environment says.
    with pytest.raises(PermanentError, match="not in HTTP_ALLOWLIST"):
        await default_registry().get("http").run(job)
    assert len(server.requests) == 2
