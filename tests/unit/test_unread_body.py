"""A reply sent before its request's body arrived closes the connection (under a
store freeze with keys required, requests answered 503 from authentication left their
keep-alive connection dead, and the client's next request on it hung)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from quart import Response, request
from quart_trio import QuartTrio

from jobscheduler.api.serving.server import serve_asgi
from jobscheduler.api.serving.unread_body import CloseUnreadBodies, Message


def early_answering_app() -> QuartTrio:
    """Answers ``401`` from ``before_request`` on ``/early`` (body never read), and echoes
    the body on ``/echo``."""
    app = QuartTrio(__name__)

    @app.before_request
    async def refuse() -> Response | None:
        if request.path == "/early":
            return Response('{"error":"no"}', status=401, content_type="application/json")
        return None

    @app.post("/echo")
    async def echo() -> Response:
        return Response(await request.get_data(), content_type="application/json")

    return app


@asynccontextmanager
async def connected_to_early_app() -> AsyncIterator[trio.SocketStream]:
    """A connection to :func:`early_answering_app`, served on a free port while the block
    runs."""
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(serve_asgi, early_answering_app(), "127.0.0.1", 0)
        port = int(bound[0].rsplit(":", 1)[1])
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            yield stream
        nursery.cancel_scope.cancel()


async def read_reply(stream: trio.SocketStream) -> tuple[int, dict[str, str], bytes]:
    """One reply (headers and a content-length body) from a keep-alive connection."""
    data = b""
    with trio.fail_after(10):
        while b"\r\n\r\n" not in data:
            data += await stream.receive_some(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        status_line, *lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
        while len(body) < int(headers.get("content-length", "0")):
            body += await stream.receive_some(65536)
    return int(status_line.split()[1]), headers, body


async def test_a_reply_sent_before_the_body_arrived_says_connection_close() -> None:
    async with connected_to_early_app() as stream:
        # Headers announce a body that is not sent yet: the app answers first.
        await stream.send_all(
            b"POST /early HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2\r\n\r\n"
        )
        status, headers, _ = await read_reply(stream)
    assert status == 401
    assert headers["connection"] == "close"


async def test_a_reply_after_the_body_was_read_keeps_the_connection_alive() -> None:
    async with connected_to_early_app() as stream:
        replies = []
        for n in range(2):  # the second request reuses the connection
            body = b'{"n":%d}' % n
            await stream.send_all(
                b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            replies.append(await read_reply(stream))
    assert [(status, body) for status, _, body in replies] == [(200, b'{"n":0}'), (200, b'{"n":1}')]
    assert all("connection" not in headers for _, headers, _ in replies)


async def _run(
    messages: list[Message], reply_after: int, headers: list[tuple[bytes, bytes]]
) -> list[Message]:
    """Drive the middleware with a fake app that reads ``reply_after`` messages and then
    replies; returns what was sent."""
    sent: list[Message] = []
    queue = list(messages)

    async def receive() -> Message:
        return queue.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    async def app(scope: Any, recv: Any, snd: Any) -> None:
        for _ in range(reply_after):
            await recv()
        await snd({"type": "http.response.start", "status": 200, "headers": [(b"a", b"b")]})
        await snd({"type": "http.response.body", "body": b""})

    scope = {"type": "http", "headers": headers}
    await CloseUnreadBodies(app)(scope, receive, send)
    return sent


async def test_the_close_is_added_only_while_body_messages_are_still_due() -> None:
    chunks: list[Message] = [
        {"type": "http.request", "body": b"a", "more_body": True},
        {"type": "http.request", "body": b"b", "more_body": False},
    ]
    with_body = [(b"content-length", b"2")]
    partly = await _run(chunks, 1, with_body)
    fully = await _run(chunks, 2, with_body)
    no_body = await _run([], 0, [(b"content-length", b"0")])
    assert partly[0]["headers"] == [(b"a", b"b"), (b"connection", b"close")]
    assert fully[0]["headers"] == [(b"a", b"b")]
    assert no_body[0]["headers"] == [(b"a", b"b")]
