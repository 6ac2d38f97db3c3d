"""Helpers of the ``http`` handler tests: a network backend that only dials loopback and
records every connection asked for, a fake resolver, a handler and job context made for
them, a redirect URL of the echo server, and the ``server`` (a local echo server) and
``backend`` fixtures."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any
from urllib.parse import quote

import httpcore
import pytest

from jobscheduler.domain.addresses import Allowlist, IPAddress
from jobscheduler.errors import ResolveError
from jobscheduler.handlers import JobContext
from jobscheduler.handlers.http import HttpHandler
from jobscheduler.handlers.netguard import AddressGuard
from jobscheduler.testing import free_port
from tests.support.http_echo import EchoServer, echo_server


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


@pytest.fixture(name="server")
async def server_fixture() -> AsyncIterator[EchoServer]:
    async with echo_server() as running:
        yield running


@pytest.fixture(name="backend")
def backend_fixture() -> RecordingBackend:
    return RecordingBackend()


def closed_port() -> int:
    """A port nothing listens on."""
    return free_port()


def redirect(server: EchoServer, to: str) -> str:
    return f"{server.base}/redirect?to={quote(to, safe='')}"
