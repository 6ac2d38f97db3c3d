"""Errors hypercorn answers before the app sees a request still use the JSON error shape
(an over-long request line got ``431`` with an empty body)."""

from __future__ import annotations

import json

import pytest
import trio

from jobscheduler.api.serving.server import serve_asgi
from jobscheduler.observability.metrics import Metrics
from jobscheduler.process.metrics_server import metrics_app


async def exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes; return (status, headers, body) of the reply (read to EOF)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        data = b""
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize(
    ("request_bytes", "status", "fragment"),
    [
        (
            b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            431,
            "too large",
        ),
        (
            b"GET / HTTP/1.1\r\nConnection: close\r\nX-Big: " + b"b" * 100_000 + b"\r\n\r\n",
            431,
            "too large",
        ),
        (b"NOT HTTP AT ALL\r\n\r\n", 400, "malformed"),
    ],
    ids=["long-request-line", "long-header", "garbage"],
)
async def test_protocol_errors_answered_by_hypercorn_have_a_json_error_body(
    request_bytes: bytes, status: int, fragment: str
) -> None:
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(serve_asgi, metrics_app(Metrics()), "127.0.0.1", 0)
        port = int(bound[0].rsplit(":", 1)[1])
        got_status, headers, body = await exchange(port, request_bytes)
        nursery.cancel_scope.cancel()
    assert got_status == status
    assert headers["content-type"] == "application/json"
    assert int(headers["content-length"]) == len(body)
    message = json.loads(body)
    assert list(message) == ["error"]
    assert fragment in message["error"]
