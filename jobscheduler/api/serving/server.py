"""Serving an ASGI app with hypercorn's trio worker inside the caller's nursery."""

from __future__ import annotations

import errno
import logging
import socket
from typing import TYPE_CHECKING, Any, cast

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from jobscheduler.errors import CannotListen

from . import closed_by_client, http_errors, one_write
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


#: Why a bind fails, by errno, in words.
_BIND_FAILURES = {
    errno.EADDRINUSE: "the port is already in use (another jobscheduler?)",
    errno.EACCES: "the port needs privileges (ports below 1024)",
    errno.EADDRNOTAVAIL: "the host is not an address of this machine",
}


def _is_bind_failure(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _BIND_FAILURES


def cannot_listen(exc: OSError, host: str, port: int, names: tuple[str, str]) -> CannotListen:
    """The one-line error for a failed bind of ``host:port``, naming the setting to change
    (``names``: the host's and the port's variables)."""
    host_name, port_name = names
    change = host_name if exc.errno == errno.EADDRNOTAVAIL else port_name
    why = _BIND_FAILURES.get(exc.errno or 0, exc.strerror or str(exc))
    return CannotListen(f"cannot listen on {host}:{port}: {why}; set {change} to change it")


def check_can_listen(host: str, port: int, names: tuple[str, str]) -> None:
    """Bind ``host:port`` once and let it go: CannotListen (naming the variable to change)
    if a listener could not, so a start-up can refuse before anything runs. Port 0 (any free
    port) always can; a later bind may still fail (serve_asgi says so the same way)."""
    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError:
        return  # the server's own bind reports a host it cannot resolve
    with socket.socket(family, kind, proto) as probe:
        # As hypercorn's sockets: a port in TIME_WAIT after a restart is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if _is_bind_failure(exc):
                raise cannot_listen(exc, host, port, names) from None


async def serve_asgi(
    app: Any,
    host: str,
    port: int,
    *,
    names: tuple[str, str] = ("API_HOST", "API_PORT"),
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve an ASGI app with hypercorn's trio worker inside the caller's nursery.

    ``task_status.started`` receives the bound addresses (port 0 picks a free port); an
    address that cannot be bound raises :class:`~jobscheduler.errors.CannotListen`, whose
    message names the variable (``names``: the host's and the port's) that changes it.
    Errors hypercorn answers itself (400, 431) carry the JSON error body too, a reply
    sent before its request's body was read closes the connection (see :mod:`.unread_body`),
    a sized reply is written in one call (:mod:`.one_write`), and a connection its client
    closed ends at once (:mod:`.closed_by_client`).
    """
    http_errors.install()
    one_write.install()
    closed_by_client.install()
    # hypercorn types the app as a union of its ASGI/WSGI callables; ours is plain ASGI.
    asgi = cast("ASGIFramework", CloseUnreadBodies(app))
    try:
        await serve(asgi, hypercorn_config(host, port), task_status=task_status)
    except* OSError as group:
        failures = [exc for exc in _leaves(group) if _is_bind_failure(exc)]
        if not failures or len(failures) != len(list(_leaves(group))):
            raise
        raise cannot_listen(cast(OSError, failures[0]), host, port, names) from None


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found
