"""Close an HTTP/1.1 connection whose request body was not read before the reply was sent.

An app may answer before the request's body has arrived: authentication fails in
``before_request`` (a ``401``, or a ``503`` when the key lookup finds the store down), a
quota refuses (``429``), the body is too large (``413``). hypercorn then finishes the response
with the request still half-received; it does not read that connection again, yet the reply
carries no ``Connection: close``, so a keep-alive client sends its next request on it and waits
for an answer that never comes (seen in the store-freeze fault scenario: a few creates in
every few hundred hung until the client's timeout, none of them reaching the app).

:class:`CloseUnreadBodies` wraps the ASGI app: it watches the request's ``http.request``
messages and, when the reply starts before the last of them, adds ``Connection: close`` to
it. The client then opens a new connection for its next request. Requests without a body, and
replies sent after the body was read (every normal request), are not touched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CLOSE = (b"connection", b"close")


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"transfer-encoding":
            return True
        if name == b"content-length" and value.strip() not in (b"", b"0"):
            return True
    return False


class CloseUnreadBodies:
    """ASGI middleware: ``Connection: close`` on a reply sent before the request body was
    fully received (see the module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        received = False

        async def tracked_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                received = True
            return message

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start" and not received:
                headers = [h for h in message.get("headers", []) if h[0].lower() != b"connection"]
                message = {**message, "headers": [*headers, CLOSE]}
            await send(message)

        await self.app(scope, tracked_receive, guarded_send)
