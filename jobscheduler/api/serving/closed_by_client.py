"""A connection its client has closed is let go at once, not after the keep-alive timeout.

When a response ends and the connection waits for its next request, hypercorn's trio server
(``TCPServer``) starts an idle timer that ends the connection after ``keep_alive_timeout``
(75 s here). When the client closes first, the read loop ends, but the timer is left
running, and the connection's tasks, buffers and protocol state stay alive until it fires.
Clients that open a connection per request (``curl``, ``requests`` without a session) close
right after reading their answer: at 200 such requests a second `dev` held thousands of
finished connections, and the garbage collector's full passes over them stalled its event
loop for 60-160 ms every few seconds (the start delay's and the POST's p99 with them).

:func:`install` wraps the read loop: once it has ended (the client closed, or the read failed
or timed out) the idle timer is stopped, so the connection ends as soon as its last response
is written. A request still being answered is not affected: its task is not the timer's.
hypercorn is pinned to one minor version in ``pyproject.toml``;
``tests/unit/test_closed_by_client.py`` fails if an upgrade moves what is wrapped.
"""

from __future__ import annotations

from typing import Any

from hypercorn.trio.tcp_server import TCPServer

from ._patch import patch_once

_INSTALLED = "_jobscheduler_closed_by_client"


def _wrap(original: Any) -> Any:
    async def _read_data(self: Any) -> None:
        await original(self)
        await self.idle_task.stop()

    return _read_data


def install() -> None:
    """Stop a connection's idle timer once its client has closed (see the module doc).
    Idempotent.

    Raises RuntimeError if this hypercorn no longer has what is wrapped."""
    patch_once(TCPServer, "_read_data", _wrap, marker=_INSTALLED)
