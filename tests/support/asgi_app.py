"""What the tests' small ASGI servers (:mod:`http_echo`, :mod:`receiver`) share: the ASGI
types, the lifespan protocol answered, and a request's headers and whole body read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def answer_lifespan(receive: Receive, send: Send) -> None:
    """Complete the server's startup and, at its end, its shutdown."""
    while True:
        message = await receive()
        kind = message["type"].removeprefix("lifespan.")
        await send({"type": f"lifespan.{kind}.complete"})
        if kind == "shutdown":
            return


async def read_request(scope: Scope, receive: Receive) -> tuple[dict[str, str], bytes]:
    """An HTTP request's headers and its whole body."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    return headers, body
