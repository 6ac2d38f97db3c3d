"""A sized HTTP/1.1 response leaves in one write: its head with its body.

hypercorn's HTTP/1.1 protocol (``H11Protocol.stream_send``) writes the response's head as soon
as the app sends ``http.response.start``, then the body as its own write: two ``send`` calls,
two segments, and a client that wakes for the head and again for the body. On a loopback or
LAN round trip those wake-ups, not the bytes, are most of what a small answer costs (a
``POST /jobs`` answered in two writes cost about a send's worth more CPU on both sides).

:func:`install` wraps that one method: the head of a response that declares its
``content-length`` (every reply of the API: Quart sizes them) is encoded as hypercorn would
and held until the body's first chunk, or its end, then written together with it. A
response without a length (streamed, chunked) is written as before, head first, so nothing
waits on a body that may be slow to come. hypercorn is pinned to one minor version in
``pyproject.toml``; ``tests/unit/test_one_write.py`` fails if an upgrade moves the method.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import h11
from hypercorn.events import RawData
from hypercorn.protocol.events import Body, EndBody, Response
from hypercorn.protocol.h11 import H11Protocol

from ._patch import patch_once

_INSTALLED = "_jobscheduler_one_write"
#: The instance attribute holding an encoded head until its body comes.
_HELD = "_jobscheduler_held_head"


def _sized(headers: Any) -> bool:
    return any(name.lower() == b"content-length" for name, _ in headers)


def _encode(protocol: Any, event: Any) -> bytes | None:
    """``event`` encoded by the connection, as ``_send_h11_event`` does; None where that
    method would send nothing (the peer's side already failed)."""
    try:
        return bytes(protocol.connection.send(event))
    except h11.LocalProtocolError:
        if protocol.connection.their_state != h11.ERROR:
            raise
        return None


def _wrap(original: Any) -> Any:
    async def stream_send(self: Any, event: Any) -> None:
        held: bytes | None = self.__dict__.pop(_HELD, None)
        if isinstance(event, Response) and event.status_code >= 200 and _sized(event.headers):
            headers = list(chain(event.headers, self.config.response_headers("h11")))
            if self.keep_alive_requests >= self.config.keep_alive_max_requests:
                headers.append((b"connection", b"close"))
            head = _encode(self, h11.Response(headers=headers, status_code=event.status_code))
            if head is not None:
                setattr(self, _HELD, head)
            return
        if held is not None:
            if isinstance(event, Body | EndBody):
                more = _encode(
                    self,
                    h11.Data(data=event.data) if isinstance(event, Body) else h11.EndOfMessage(),
                )
                await self.send(RawData(data=held + (more or b"")))
                return
            await self.send(RawData(data=held))
        await original(self, event)

    return stream_send


def install() -> None:
    """Write each sized HTTP/1.1 response in one call (see the module doc). Idempotent.

    Raises RuntimeError if this hypercorn no longer has the method being wrapped."""
    patch_once(H11Protocol, "stream_send", _wrap, marker=_INSTALLED)
