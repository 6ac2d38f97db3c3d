"""A tiny HTTP server on 127.0.0.1 for tests of the ``http`` handler (ASGI on hypercorn/trio).

Routes:
- ``/echo``: 200 with ``{"method", "path", "query", "headers", "body"}`` of the request;
- ``/status/<code>``: that status, same echo body;
- ``/big``: 200 with 10,000 bytes of UTF-8 text (a 2-byte character straddles byte 4096);
- ``/hang``: never answers (until the server stops);
- ``/redirect?to=<url>``: 302 to ``to``.

Every request is recorded in ``EchoServer.requests`` so a test can tell whether (and with
which Host header) the server was reached.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from functools import partial
from typing import Any
from urllib.parse import parse_qs

import attrs
import trio
import trustme
from hypercorn.trio import serve

from jobscheduler.api.serving.server import hypercorn_config
from tests.support.asgi_app import Receive, Scope, Send, answer_lifespan, read_request

#: /big's body: 4095 ASCII bytes, then "é" (2 bytes: 4095-4096), then more ASCII.
BIG_BODY = ("a" * 4095 + "é" + "b" * 5903).encode()


@attrs.define
class EchoServer:
    port: int = 0
    scheme: str = "http"
    requests: list[dict[str, Any]] = attrs.field(factory=list)

    @property
    def base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        headers, body = await read_request(scope, receive)
        seen = {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope["query_string"].decode(),
            "headers": headers,
            "body": body.decode(errors="replace"),
        }
        self.requests.append(seen)
        path: str = scope["path"]
        status, extra, payload = 200, [], json.dumps(seen).encode()
        if path.startswith("/status/"):
            status = int(path.removeprefix("/status/"))
        elif path == "/big":
            payload = BIG_BODY
            extra = [(b"content-type", b"text/plain; charset=utf-8")]
        elif path == "/hang":
            await trio.sleep_forever()
        elif path == "/redirect":
            target = parse_qs(seen["query"])["to"][0]
            status, extra = 302, [(b"location", target.encode())]
        if not extra:
            extra = [(b"content-type", b"application/json")]
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [*extra, (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})


@asynccontextmanager
async def echo_server(tls: trustme.LeafCert | None = None) -> AsyncIterator[EchoServer]:
    """Serve an :class:`EchoServer` on 127.0.0.1 (a free port) for the block's duration;
    over TLS with the ``tls`` certificate when given."""
    server = EchoServer(scheme="http" if tls is None else "https")
    config = hypercorn_config("127.0.0.1", 0)
    with ExitStack() as files:
        if tls is not None:
            pem = files.enter_context(tls.private_key_and_cert_chain_pem.tempfile())
            config.certfile = config.keyfile = pem
        async with trio.open_nursery() as nursery:
            bound: list[str] = await nursery.start(partial(serve, server.app, config))
            server.port = int(bound[0].rsplit(":", 1)[1])
            yield server
            nursery.cancel_scope.cancel()
