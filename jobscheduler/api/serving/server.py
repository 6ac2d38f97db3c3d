"""Serving an ASGI app with hypercorn's trio worker inside the caller's nursery."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from . import http_errors
from .unread_body import CloseUnreadBodies

if TYPE_CHECKING:
    from hypercorn.typing import ASGIFramework


def hypercorn_config(host: str, port: int) -> HypercornConfig:
    config = HypercornConfig()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 5.0
    config.keep_alive_timeout = 75.0
    return config


async def serve_asgi(
    app: Any,
    host: str,
    port: int,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve an ASGI app with hypercorn's trio worker inside the caller's nursery.

    ``task_status.started`` receives the bound addresses (port 0 picks a free port).
    Errors hypercorn answers itself (400, 431) carry the JSON error body too, and a reply
    sent before its request's body was read closes the connection (see :mod:`.unread_body`).
    """
    http_errors.install()
    # hypercorn types the app as a union of its ASGI/WSGI callables; ours is plain ASGI.
    asgi = cast("ASGIFramework", CloseUnreadBodies(app))
    await serve(asgi, hypercorn_config(host, port), task_status=task_status)
