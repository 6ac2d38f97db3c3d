"""The bench's HTTP client: a minimal keep-alive HTTP/1.1 client on raw trio streams.

Client and server share the machine. To keep the client's share small, the bench's requests
go through this client (httpx costs several times more CPU per request than the server under
test): :class:`Connection` sends a request and reads its whole response, in turn;
:class:`Pool` hands out a fixed number of them, one request at a time, with JSON bodies.
"""

from __future__ import annotations

import json
from typing import Any

import trio

#: A keep-alive connection idle this long is opened afresh rather than reused: the server
#: ends idle ones after its keep-alive timeout (75 s), and a request sent on one it ended
#: gets no answer. (A phase may wait minutes for a drain between two requests.)
IDLE_REOPEN = 30.0


class Connection:
    """One keep-alive HTTP/1.1 connection: a request, then its full response, in turn."""

    def __init__(self, host: str, port: int, headers: str = "") -> None:
        self._host, self._port = host, port
        #: Extra header lines (``Name: value\r\n`` each), e.g. the Authorization.
        self._headers = headers
        self._stream: trio.SocketStream | None = None
        #: When the last answer was read (trio time).
        self._used_at = 0.0
        self._buffer = b""

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self._stream is not None and trio.current_time() - self._used_at > IDLE_REOPEN:
            await self.aclose()
        if self._stream is None:
            self._stream = await trio.open_tcp_stream(self._host, self._port)
            self._buffer = b""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"{self._headers}\r\n"
        )
        await self._stream.send_all(head.encode() + body)
        while b"\r\n\r\n" not in self._buffer:
            await self._receive()
        header, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length, close = 0, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection":
                close = value.strip().lower() == "close"
        while len(self._buffer) < length:
            await self._receive()
        payload, self._buffer = self._buffer[:length], self._buffer[length:]
        self._used_at = trio.current_time()
        if close:
            # hypercorn ends a keep-alive connection after 1,000 requests (its
            # keep_alive_max_requests), saying so here; the next request opens a new one.
            await self.aclose()
        return status, payload

    async def _receive(self) -> None:
        assert self._stream is not None
        data = await self._stream.receive_some(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        self._buffer += data

    async def aclose(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.aclose()


class Pool:
    """A fixed number of connections handed out one request at a time."""

    def __init__(self, url: str, size: int, key: str | None = None) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self._send, self._receive = trio.open_memory_channel[Connection](size)
        headers = f"Authorization: Bearer {key}\r\n" if key else ""
        self._all = [Connection(host, int(port), headers) for _ in range(size)]
        for conn in self._all:
            self._send.send_nowait(conn)

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        status, payload = await self.request_bytes(method, path, body)
        return status, json.loads(payload) if payload else None

    async def request_bytes(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        """As :meth:`request`, the answer's body as it came (a page's HTML)."""
        conn = await self._receive.receive()
        try:
            data = json.dumps(body).encode() if body is not None else b""
            return await conn.request(method, path, data)
        finally:
            self._send.send_nowait(conn)

    async def aclose(self) -> None:
        for conn in self._all:
            await conn.aclose()


class FreshPool(Pool):
    """A new connection for every request, closed after its answer: clients that do not
    keep connections alive (``curl``, ``requests`` without a session)."""

    def __init__(self, url: str, size: int, key: str | None = None) -> None:
        super().__init__(url, size, key)
        self._host, port = url.removeprefix("http://").rsplit(":", 1)
        self._port = int(port)
        self._headers = f"Authorization: Bearer {key}\r\n" if key else ""

    async def request_bytes(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        conn = Connection(self._host, self._port, self._headers)
        try:
            data = json.dumps(body).encode() if body is not None else b""
            return await conn.request(method, path, data)
        finally:
            await conn.aclose()
