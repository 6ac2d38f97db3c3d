"""Free TCP ports on 127.0.0.1 for the servers a test or a tool starts."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the OS's pick; a race with other processes is possible,
    but the servers are started at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
