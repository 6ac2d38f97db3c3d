"""The bench's raw keep-alive HTTP/1.1 client and a stack process's metrics reader, against
a scripted in-process TCP server (no ``jobscheduler`` process)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path

import pytest
import trio

from jobscheduler.tools.bench.http import IDLE_REOPEN, Connection, Pool
from jobscheduler.tools.bench.stack import Process

Reply = Callable[[bytes], list[bytes]]


async def _read_request(stream: trio.SocketStream, buffer: bytearray) -> bytes | None:
    """One request (head and Content-Length body) off ``stream``; None at its end."""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        rest += await stream.receive_some(65536)
    buffer[:] = rest[length:]
    return head + b"\r\n\r\n" + rest[:length]


class ScriptedServer:
    """Answers each request with the chunks ``reply(request)`` returns, sent one by one; an
    empty chunk closes the connection. Records every request and counts connections."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[bytes] = []
        self.connections = 0
        self.port = 0

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        buffer = bytearray()
        async with stream:
            while (request := await _read_request(stream, buffer)) is not None:
                self.requests.append(request)
                for chunk in self.reply(request):
                    if not chunk:
                        return
                    await stream.send_all(chunk)
                    await trio.lowlevel.checkpoint()


Serve = Callable[[Reply], Awaitable[ScriptedServer]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    async with trio.open_nursery() as nursery:

        async def start(reply: Reply) -> ScriptedServer:
            server = ScriptedServer(reply)
            listeners = await nursery.start(
                partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1")
            )
            server.port = listeners[0].socket.getsockname()[1]
            return server

        yield start
        nursery.cancel_scope.cancel()


def response(status: int, body: bytes, *, close: bool = False) -> bytes:
    extra = b"Connection: close\r\n" if close else b""
    return (
        f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n".encode() + extra + b"\r\n" + body
    )


async def test_a_response_split_across_reads_is_read_whole_and_the_connection_reused(
    serve: Serve,
) -> None:
    def reply(request: bytes) -> list[bytes]:
        body = request.partition(b"\r\n\r\n")[2] or b"{}"
        whole = response(201, body)
        return [whole[:10], whole[10:40], whole[40:]]

    server = await serve(reply)
    conn = Connection("127.0.0.1", server.port, "X-Extra: 1\r\n")
    try:
        assert await conn.request("POST", "/jobs", b'{"a": 1}') == (201, b'{"a": 1}')
        assert await conn.request("GET", "/jobs") == (201, b"{}")
    finally:
        await conn.aclose()
    assert server.connections == 1
    first = server.requests[0].decode()
    assert first.startswith("POST /jobs HTTP/1.1\r\n")
    assert "Content-Length: 8\r\n" in first
    assert "X-Extra: 1\r\n" in first


async def test_connection_close_from_the_server_makes_the_next_request_reconnect(
    serve: Serve,
) -> None:
    """hypercorn ends a keep-alive connection after 1,000 requests with ``Connection:
    close``; the request after it must go out on a new connection, not fail."""
    server = await serve(lambda _: [response(200, b"ok", close=True), b""])
    conn = Connection("127.0.0.1", server.port)
    try:
        assert await conn.request("GET", "/a") == (200, b"ok")
        assert await conn.request("GET", "/b") == (200, b"ok")
    finally:
        await conn.aclose()
    assert server.connections == 2


async def test_a_connection_idle_past_the_bound_is_opened_afresh(
    serve: Serve, autojump_clock: trio.testing.MockClock
) -> None:
    """A server ends an idle keep-alive connection after its timeout (hypercorn's 75 s); a
    phase that waited a long drain between two requests must not send on it."""
    server = await serve(lambda _: [response(200, b"ok")])
    conn = Connection("127.0.0.1", server.port)
    try:
        assert await conn.request("GET", "/a") == (200, b"ok")
        await trio.sleep(IDLE_REOPEN / 2)
        assert await conn.request("GET", "/b") == (200, b"ok")
        assert server.connections == 1
        await trio.sleep(IDLE_REOPEN * 2)
        assert await conn.request("GET", "/c") == (200, b"ok")
    finally:
        await conn.aclose()
    assert server.connections == 2


async def test_a_server_that_closes_mid_response_raises_connection_error(
    serve: Serve,
) -> None:
    server = await serve(lambda _: [response(200, b"0123456789")[:-4], b""])
    conn = Connection("127.0.0.1", server.port)
    try:
        with pytest.raises(ConnectionError, match="server closed the connection"):
            await conn.request("GET", "/")
    finally:
        await conn.aclose()


async def test_the_pool_sends_json_with_the_bearer_key_and_decodes_the_reply(
    serve: Serve,
) -> None:
    server = await serve(lambda request: [response(201, request.partition(b"\r\n\r\n")[2])])
    pool = Pool(f"http://127.0.0.1:{server.port}", 2, key="secret")
    try:
        assert await pool.request("POST", "/jobs", {"id": "j-1"}) == (201, {"id": "j-1"})
        assert await pool.request("GET", "/jobs") == (201, None)  # empty body: no JSON
    finally:
        await pool.aclose()
    assert all(b"Authorization: Bearer secret\r\n" in r for r in server.requests)
    assert json.loads(server.requests[0].partition(b"\r\n\r\n")[2]) == {"id": "j-1"}


async def test_a_metric_sums_the_samples_with_the_labels_and_skips_longer_names(
    serve: Serve, tmp_path: Path
) -> None:
    text = (
        b"# TYPE executor_jobs_processed_total counter\n"
        b'executor_jobs_processed_total{job_type="a",result="completed"} 3.0\n'
        b'executor_jobs_processed_total{job_type="b",result="completed"} 4.0\n'
        b'executor_jobs_processed_total{job_type="a",result="failed"} 5.0\n'
        b"scheduler_is_leader 1.0\n"
        b"scheduler_is_leader_changes_total 9.0\n"
    )
    server = await serve(lambda _: [response(200, text)])
    process = Process("dev", ["dev"], {}, tmp_path / "dev.log", metrics_port=server.port)
    completed = await process.metric("executor_jobs_processed_total", result="completed")
    assert completed == 7.0
    assert await process.metric("scheduler_is_leader") == 1.0
    assert await process.metric("executor_jobs_processed_total", result="dlq") == 0.0
