"""The clients' transport: a request's head and body leave in one write, on a kept-alive
connection, with httpx's behaviour otherwise unchanged."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpcore
import pytest

from jobscheduler.client import AsyncClient, Client
from jobscheduler.client._transport import FLUSH_AT, _AsyncStream, _Stream, coalesces


class Recording(httpcore.NetworkStream):
    def __init__(self, answer: bytes = b"") -> None:
        self.writes: list[bytes] = []
        self.answer = answer
        self.closed = False

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.writes.append(buffer)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        answer, self.answer = self.answer, b""
        return answer

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, info: str) -> Any:
        return f"info:{info}"


def test_the_head_and_body_are_written_together_at_the_first_read() -> None:
    inner = Recording(b"HTTP/1.1 201 Created\r\n")
    stream = _Stream(inner)
    stream.write(b"POST /jobs HTTP/1.1\r\n\r\n")
    stream.write(b'{"a":1}')
    stream.write(b"")  # h11's end of a sized body
    assert inner.writes == []
    assert stream.read(65536) == b"HTTP/1.1 201 Created\r\n"
    assert inner.writes == [b'POST /jobs HTTP/1.1\r\n\r\n{"a":1}']
    assert stream.get_extra_info("is_readable") == "info:is_readable"


def test_a_large_body_is_sent_as_it_grows_not_held_whole() -> None:
    inner = Recording()
    stream = _Stream(inner)
    stream.write(b"h" * 100)
    stream.write(b"b" * FLUSH_AT)
    assert [len(w) for w in inner.writes] == [100 + FLUSH_AT]
    stream.write(b"tail")
    stream.read(10)
    assert inner.writes[-1] == b"tail"


async def test_the_async_stream_holds_writes_until_the_first_read() -> None:
    writes: list[bytes] = []

    class Inner(httpcore.AsyncNetworkStream):
        async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
            writes.append(buffer)

        async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
            return b"HTTP/1.1 200 OK\r\n"

    stream = _AsyncStream(Inner())
    await stream.write(b"head")
    await stream.write(b"body")
    assert writes == []
    await stream.read(100)
    assert writes == [b"headbody"]


@pytest.fixture
def server() -> Iterator[tuple[str, list[int], list[bytes]]]:
    """An HTTP/1.1 server on 127.0.0.1 answering every request with its body as JSON;
    yields (its URL, the connections it accepted, the bodies it read)."""
    listener = socket.create_server(("127.0.0.1", 0))
    connections: list[int] = []
    bodies: list[bytes] = []

    def serve(conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            while True:
                line = reader.readline()
                if not line:
                    return
                length = 0
                while (header := reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = reader.read(length)
                bodies.append(body)
                reply = json.dumps({"echo": json.loads(body or b"null")}).encode()
                conn.sendall(
                    b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(reply), reply)
                )

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            connections.append(1)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    host, port = listener.getsockname()
    try:
        yield f"http://{host}:{port}", connections, bodies
    finally:
        listener.close()


def test_the_blocking_client_sends_whole_requests_on_one_kept_alive_connection(
    server: tuple[str, list[int], list[bytes]],
) -> None:
    url, connections, bodies = server
    with Client(url) as client:
        assert coalesces(client._http._transport)
        for i in range(3):
            response = client._http.post("/jobs", json={"n": i})
            assert response.json() == {"echo": {"n": i}}
    assert connections == [1]
    assert bodies == [b'{"n":0}', b'{"n":1}', b'{"n":2}']


async def test_the_async_client_sends_whole_requests_too(
    server: tuple[str, list[int], list[bytes]],
) -> None:
    url, connections, _ = server
    async with AsyncClient(url) as client:
        assert coalesces(client._http._transport)
        for i in range(2):
            response = await client._http.post("/jobs", json={"n": i})
            assert response.json() == {"echo": {"n": i}}
    assert connections == [1]


def test_a_transport_of_the_callers_is_used_as_it_is() -> None:
    import httpx

    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={}))
    with Client("http://127.0.0.1:1", transport=transport) as client:
        assert client._http._transport is transport
