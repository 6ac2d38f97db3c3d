"""The clients' HTTP transports: httpx's own, each request sent in one write.

httpx (through httpcore) writes a request's head and its body as two ``send`` calls. The
server then wakes for the head, reads, and wakes again for the body; on a loopback or LAN
round trip those wake-ups, not the bytes, are most of the time a small create takes. Here
the connection's stream keeps what is written until the first read (the response's head) or
until :data:`FLUSH_AT` bytes are waiting, then sends it in one call: one segment, one wake-up
of the server per request. Nothing else changes (keep-alive, TLS, proxies, limits and
timeouts are httpx's); a write error surfaces at that first read instead, still as an
``httpx.TransportError``.

The stream is httpcore's public ``NetworkStream`` interface; the backend is put in front of
the pool httpx built (``_pool._network_backend``, httpcore 1.x), and a transport whose pool
does not look like that is used as it is (``tests/unit/test_client_transport.py`` fails if
an upgrade moves it).
"""

# The async stream and backend implement httpcore's interface, whose methods take `timeout`.
# ruff: noqa: ASYNC109

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

#: Bytes held before they are sent anyway (a large body is not buffered whole).
FLUSH_AT = 64 * 1024


class _Held:
    """The bytes a stream keeps until they are sent in one call: the bookkeeping the sync
    and the async stream share (only their sending differs)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        #: The timeout of the latest write, the one the held bytes are sent with.
        self.timeout: float | None = None

    def add(self, buffer: bytes, timeout: float | None) -> bool:
        """Keep ``buffer`` (an empty one is ignored); True when :data:`FLUSH_AT` bytes are
        waiting, to be sent now."""
        if not buffer:
            return False
        self._parts.append(buffer)
        self._size += len(buffer)
        self.timeout = timeout
        return self._size >= FLUSH_AT

    def take(self) -> bytes:
        """All the bytes held, joined (empty if none), and forget them."""
        parts = self._parts
        self.clear()
        return b"".join(parts) if len(parts) > 1 else (parts[0] if parts else b"")

    def clear(self) -> None:
        self._parts, self._size = [], 0


class _Stream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream
        self._held = _Held()

    def _flush(self) -> None:
        if data := self._held.take():
            self._stream.write(data, self._held.timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._held.add(buffer, timeout):
            self._flush()

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._flush()
        return self._stream.read(max_bytes, timeout)

    def close(self) -> None:
        self._held.clear()
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        self._flush()
        return _Stream(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return _Stream(
            self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return _Stream(self._backend.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _AsyncStream(httpcore.AsyncNetworkStream):
    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._held = _Held()

    async def _flush(self) -> None:
        if data := self._held.take():
            await self._stream.write(data, self._held.timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._held.add(buffer, timeout):
            await self._flush()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        await self._flush()
        return await self._stream.read(max_bytes, timeout)

    async def aclose(self) -> None:
        self._held.clear()
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        await self._flush()
        return _AsyncStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _AsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        return _AsyncStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        return _AsyncStream(await self._backend.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def _coalesce(transport: Any, wrap: Any, base: type) -> bool:
    """Put ``wrap`` in front of the network backend of the pool ``transport`` built;
    False (nothing changed) if the pool does not look as expected."""
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if not isinstance(backend, base):
        return False
    pool._network_backend = wrap(backend)  # type: ignore[union-attr]
    return True


def sync_transport() -> httpx.HTTPTransport:
    """httpx's default transport, each request written in one call."""
    transport = httpx.HTTPTransport()
    _coalesce(transport, _Backend, httpcore.NetworkBackend)
    return transport


def async_transport() -> httpx.AsyncHTTPTransport:
    """httpx's default async transport, each request written in one call."""
    transport = httpx.AsyncHTTPTransport()
    _coalesce(transport, _AsyncBackend, httpcore.AsyncNetworkBackend)
    return transport


def coalesces(transport: Any) -> bool:
    """Whether ``transport`` writes each request in one call (for the tests)."""
    backend = getattr(getattr(transport, "_pool", None), "_network_backend", None)
    return isinstance(backend, _Backend | _AsyncBackend)
