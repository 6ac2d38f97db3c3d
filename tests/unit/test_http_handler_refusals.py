"""The built-in ``http`` handler's refusals and redirects: internal destinations (by name,
address or URL form) refused before any connection is opened -- the recording network
backend asserts it was never asked to connect -- and redirects: not followed unless enabled,
each hop checked again, capped, never to another scheme."""

from __future__ import annotations

import pytest

from jobscheduler.errors import PermanentError
from tests.support.http_echo import EchoServer

from .http_handler_support import (
    RecordingBackend,
    backend_fixture,  # noqa: F401  (registers the fixture)
    ctx,
    make_handler,
    redirect,
    server_fixture,  # noqa: F401  (registers the fixture)
)

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
