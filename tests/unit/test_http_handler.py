"""The built-in ``http`` handler against a real server on 127.0.0.1 (named by the allowlist),
and its refusals, which never open a connection: every test dials through a recording
network backend that only lets loopback connections through, and refusal tests assert that
it was never asked to connect at all."""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any
from urllib.parse import quote

import httpcore
import pytest
import trustme

from jobscheduler.config import Settings
from jobscheduler.domain.addresses import Allowlist, IPAddress
from jobscheduler.errors import HandlerError, PermanentError, ResolveError
from jobscheduler.handlers import JobContext, default_registry
from jobscheduler.handlers.http import HttpHandler
from jobscheduler.handlers.netguard import AddressGuard
from tests.support.http_echo import BIG_BODY, EchoServer, echo_server


class RecordingBackend(httpcore.AsyncNetworkBackend):
    """Dials through trio, but only to loopback; records every connection asked for."""

    def __init__(self) -> None:
        self.inner = httpcore.TrioBackend()
        self.connects: list[tuple[str, int]] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connects.append((host, port))
        if not ipaddress.ip_address(host).is_loopback:
            raise AssertionError(f"the test tried to connect to {host}:{port}")
        return await self.inner.connect_tcp(host, port, timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class FakeResolver:
    def __init__(self, table: dict[str, Sequence[str]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.calls.append(host)
        if host not in self.table:
            raise ResolveError(f"cannot resolve {host!r}")
        return [ipaddress.ip_address(a) for a in self.table[host]]


RESOLVER = FakeResolver(
    {
        "localhost": ["127.0.0.1", "::1"],
        "hooks.test": ["127.0.0.1"],
        "internal.test": ["10.0.0.1"],
        "metadata.test": ["169.254.169.254"],
    }
)


def make_handler(
    backend: RecordingBackend,
    *,
    allow: Sequence[str] = ("127.0.0.1",),
    resolver: FakeResolver = RESOLVER,
    follow_redirects: bool = False,
    max_redirects: int = 5,
) -> HttpHandler:
    return HttpHandler(
        guard=AddressGuard(allowlist=Allowlist.parse(allow), resolver=resolver),
        follow_redirects=follow_redirects,
        max_redirects=max_redirects,
        network_backend=backend,
    )


def ctx(**payload: Any) -> JobContext:
    return JobContext(
        job_id="job-1",
        tenant_id="tenant-a",
        job_type="http",
        payload=payload,
        attempt=1,
        max_attempts=3,
        logger=logging.LoggerAdapter(logging.getLogger("test"), {}),
    )


@pytest.fixture
async def server() -> AsyncIterator[EchoServer]:
    async with echo_server() as running:
        yield running


@pytest.fixture
def backend() -> RecordingBackend:
    return RecordingBackend()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


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


# ----------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://2130706433/", "loopback"),
        ("http://0x7f.1/", "loopback"),
        ("http://127.1:8080/", "loopback"),
        ("http://localhost/", "loopback"),
        ("http://LOCALHOST./", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "link-local (cloud metadata)"),
        ("http://0xa9fea9fe/", "link-local (cloud metadata)"),
        ("http://metadata.test/", "link-local (cloud metadata)"),
        ("http://[::ffff:127.0.0.1]/", "IPv4-mapped form of 127.0.0.1: loopback"),
        ("http://[::ffff:a9fe:a9fe]/", "IPv4-mapped form of 169.254.169.254"),
        ("http://[64:ff9b::a00:1]/", "NAT64 form of 10.0.0.1"),
        ("http://internal.test/", "internal.test -> 10.0.0.1 is private (RFC 1918)"),
        ("https://[fd00::1]/", "unique local (ULA)"),
        ("http://100.64.1.1/", "carrier-grade NAT"),
        ("http://0.0.0.0:80/", "unspecified"),
        ("http://0:8080/", "unspecified"),
        ("http://127.0.0.1.:8080/", "loopback"),
    ],
)
async def test_internal_destinations_are_refused_before_any_connection(
    backend: RecordingBackend, url: str, reason: str
) -> None:
    handler = make_handler(backend, allow=())
    with pytest.raises(PermanentError, match="refused") as info:
        await handler.run(ctx(url=url))
    assert reason in str(info.value)
    assert backend.connects == []


async def test_the_octal_form_is_rejected_as_an_invalid_url_without_a_connection(
    backend: RecordingBackend,
) -> None:
    # httpx itself refuses to parse 0177.0.0.1; the validator turns that into a 400.
    with pytest.raises(PermanentError, match="invalid payload"):
        await make_handler(backend, allow=()).run(ctx(url="http://0177.0.0.1/"))
    assert backend.connects == []


async def test_loopback_is_refused_unless_the_allowlist_names_it(
    server: EchoServer, backend: RecordingBackend
) -> None:
    with pytest.raises(PermanentError, match="not in HTTP_ALLOWLIST"):
        await make_handler(backend, allow=()).run(ctx(url=f"{server.base}/echo"))
    assert backend.connects == []
    assert server.requests == []


# ----------------------------------------------------------------------- redirects


def redirect(server: EchoServer, to: str) -> str:
    return f"{server.base}/redirect?to={quote(to, safe='')}"


async def test_redirects_are_not_followed_by_default(
    server: EchoServer, backend: RecordingBackend
) -> None:
    with pytest.raises(PermanentError, match="not followed: HTTP_FOLLOW_REDIRECTS is off"):
        await make_handler(backend).run(ctx(url=redirect(server, f"{server.base}/echo")))
    assert [r["path"] for r in server.requests] == ["/redirect"]


async def test_a_redirect_can_be_expected_instead_of_followed(
    server: EchoServer, backend: RecordingBackend
) -> None:
    result = await make_handler(backend).run(
        ctx(url=redirect(server, "https://example.com/"), expectStatus=302)
    )
    assert result["status"] == 302
    assert result["headers"]["location"] == "https://example.com/"


async def test_redirects_are_followed_when_enabled(
    server: EchoServer, backend: RecordingBackend
) -> None:
    handler = make_handler(backend, follow_redirects=True)
    result = await handler.run(ctx(url=redirect(server, f"{server.base}/echo"), method="GET"))
    assert result["status"] == 200
    assert [r["path"] for r in server.requests] == ["/redirect", "/echo"]


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("http://127.0.0.2:{port}/echo", "127.0.0.2 is loopback"),
        ("http://localhost:{port}/echo", "localhost -> ::1 is loopback"),
        ("http://[::1]:{port}/echo", "::1 is loopback"),
        ("http://169.254.169.254/latest/meta-data/", "link-local (cloud metadata)"),
        ("http://internal.test/", "private (RFC 1918)"),
    ],
)
async def test_each_redirect_hop_is_checked_again(
    server: EchoServer, backend: RecordingBackend, target: str, reason: str
) -> None:
    handler = make_handler(backend, follow_redirects=True)
    url = redirect(server, target.format(port=server.port))
    with pytest.raises(PermanentError, match="refused") as info:
        await handler.run(ctx(url=url, method="GET"))
    assert reason in str(info.value)
    # Only the first hop, to the allowlisted server, was ever dialled.
    assert backend.connects == [("127.0.0.1", server.port)]
    assert [r["path"] for r in server.requests] == ["/redirect"]


async def test_more_redirects_than_the_cap_are_permanent(
    server: EchoServer, backend: RecordingBackend
) -> None:
    url = f"{server.base}/echo"
    for _ in range(3):
        url = redirect(server, url)
    handler = make_handler(backend, follow_redirects=True, max_redirects=2)
    with pytest.raises(PermanentError, match="more than 2 redirects"):
        await handler.run(ctx(url=url, method="GET"))
    assert len(server.requests) == 3


async def test_a_redirect_to_another_scheme_is_permanent(
    server: EchoServer, backend: RecordingBackend
) -> None:
    handler = make_handler(backend, follow_redirects=True)
    with pytest.raises(PermanentError, match="cannot follow"):
        await handler.run(ctx(url=redirect(server, "ftp://example.com/file"), method="GET"))
    assert backend.connects == [("127.0.0.1", server.port)]


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
