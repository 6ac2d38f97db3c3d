"""A sized reply leaves the server in one write (head and body together); a reply without a
length still sends its head first; and keep-alive, HEAD and errors are unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from hypercorn.events import RawData
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.tcp_server import TCPServer

from jobscheduler.api.serving import one_write
from jobscheduler.api.serving.server import serve_asgi


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            kind = message["type"].rsplit(".", 1)[-1]  # startup or shutdown
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    while (await receive()).get("more_body"):
        pass
    if scope["path"] == "/streamed":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"one", "more_body": True})
        await send({"type": "http.response.body", "body": b"two"})
        return
    body = b'{"ok":true}'
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 201, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[int, list[bytes]]]:
    """The app on a free port, and every write the server made."""
    writes: list[bytes] = []
    original = TCPServer.protocol_send

    async def recording(self: TCPServer, event: Any) -> None:
        if isinstance(event, RawData) and event.data:
            writes.append(event.data)
        await original(self, event)

    monkeypatch.setattr(TCPServer, "protocol_send", recording)
    async with trio.open_nursery() as nursery:
        [address] = await nursery.start(serve_asgi, app, "127.0.0.1", 0)
        yield int(address.rsplit(":", 1)[1]), writes
        nursery.cancel_scope.cancel()


async def exchange(port: int, requests: bytes, replies: int) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(requests)
        data = b""
        with trio.fail_after(10):
            while data.count(b"HTTP/1.1 ") < replies or not data.endswith(
                (b"}", b"two", b"\r\n\r\n")
            ):
                data += await stream.receive_some(65536)
    return data


async def test_a_sized_reply_is_one_write_and_the_connection_is_kept(
    served: tuple[int, list[bytes]],
) -> None:
    port, writes = served
    request = b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    data = await exchange(port, request, 1)
    assert data.startswith(b"HTTP/1.1 201 ")
    assert len(writes) == 1
    assert writes[0].startswith(b"HTTP/1.1 201 ")
    assert writes[0].endswith(b'{"ok":true}')
    writes.clear()
    await exchange(port, request * 2, 2)  # two on one connection: one write each
    assert len(writes) == 2


async def test_a_head_request_gets_its_head_in_one_write(served: tuple[int, list[bytes]]) -> None:
    port, writes = served
    data = await exchange(port, b"HEAD /jobs HTTP/1.1\r\nHost: x\r\n\r\n", 1)
    assert data.startswith(b"HTTP/1.1 201 ")
    assert data.endswith(b"\r\n\r\n")
    assert len(writes) == 1


async def test_a_reply_without_a_length_sends_its_head_first(
    served: tuple[int, list[bytes]],
) -> None:
    port, writes = served
    data = await exchange(port, b"GET /streamed HTTP/1.1\r\nHost: x\r\n\r\n", 1)
    assert b"transfer-encoding: chunked" in data.lower()
    assert writes[0].startswith(b"HTTP/1.1 200 ")
    assert b"one" not in writes[0]


def test_install_is_idempotent_and_wraps_the_method_hypercorn_has() -> None:
    one_write.install()
    wrapped = H11Protocol.stream_send
    one_write.install()
    assert H11Protocol.stream_send is wrapped
    assert getattr(H11Protocol, "_jobscheduler_one_write", False)
