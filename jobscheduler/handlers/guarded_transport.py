"""An httpx transport whose every connection goes to an address the guard has vetted.

httpx sends through httpcore's connection pool, and the pool opens connections through a
pluggable *network backend* (``httpcore.AsyncNetworkBackend``, public API). Our backend's
``connect_tcp(host, port)`` asks the :class:`~.netguard.AddressGuard` for the vetted
addresses of ``host`` and dials those IPs itself, so no second DNS lookup can swap the
address between the check and the connection. The pool still knows the origin by name, so
the ``Host`` header, TLS SNI and certificate verification all use the name from the URL.
Every new connection goes through the guard: each redirect hop to another origin is
checked again.

httpx's own ``AsyncHTTPTransport`` accepts no network backend, so this is a small
``httpx.AsyncBaseTransport`` over a public ``httpcore.AsyncConnectionPool``; httpcore's
exceptions are translated into httpx's here, at the edge.
"""

from __future__ import annotations

import ssl
import typing
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager, nullcontext

import httpcore
import httpx
import trio

from jobscheduler.errors import ResolveError

from .netguard import AddressGuard

# httpcore exception -> the httpx exception it becomes (most specific first in each MRO).
_EXCEPTIONS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
    httpcore.ProtocolError: httpx.ProtocolError,
}


def _message(exc: BaseException) -> str:
    """The first non-empty message along the ``__cause__`` chain (trio wraps TLS errors in
    an empty BrokenResourceError, httpcore wraps that in an empty ConnectError)."""
    current: BaseException | None = exc
    for _ in range(5):
        if current is None:
            break
        if str(current):
            return str(current)
        current = current.__cause__ or current.__context__
    return type(exc).__name__


@contextmanager
def _translated(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for cls in type(exc).__mro__:
            mapped = _EXCEPTIONS.get(cls)
            if mapped is not None:
                raise mapped(_message(exc), request=request) from exc
        raise


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Opens TCP connections only to addresses :meth:`AddressGuard.vet` returned."""

    def __init__(
        self, guard: AddressGuard, inner: httpcore.AsyncNetworkBackend | None = None
    ) -> None:
        self._guard = guard
        self._inner = inner if inner is not None else httpcore.TrioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with trio.fail_after(timeout) if timeout is not None else nullcontext():
                addresses = await self._guard.vet(host, port)
        except trio.TooSlowError:
            raise httpcore.ConnectTimeout(f"resolving {host!r} timed out") from None
        except ResolveError as exc:
            raise httpcore.ConnectError(str(exc)) from None
        # AddressRefused propagates as is: the caller tells it apart from network errors.
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # vet() never returns an empty list
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable through the guard")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: typing.AsyncIterable[bytes], request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _translated(self._request):
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            with _translated(self._request):
                await close()


class GuardedTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over connections to vetted addresses only (no proxies, no unix sockets)."""

    def __init__(
        self,
        guard: AddressGuard,
        *,
        ssl_context: ssl.SSLContext,
        network_backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            network_backend=GuardedBackend(guard, network_backend),
            max_connections=4,
            http1=True,
            http2=False,
            retries=0,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _translated(request):
            response = await self._pool.handle_async_request(core_request)
        assert isinstance(response.stream, typing.AsyncIterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream, request),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
