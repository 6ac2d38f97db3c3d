"""Free TCP ports on 127.0.0.1 for the servers a test or a tool starts."""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: Where the kernel keeps the range it picks outgoing connections' local ports from.
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: The lowest port handed out: above the well-known and most registered services' ports.
LOWEST = 20_000
#: The picks' source: the operating system's, never the ``random`` module's state, which a
#: test may seed (two processes seeded alike would pick alike).
_PICK = random.SystemRandom()
#: The ports this process has handed out: one is never handed out twice, since the server
#: it went to may not have bound it yet when the next is picked (a cluster's processes
#: start at once, and two of them were once given the same port).
_GIVEN: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def bindable(port: int) -> bool:
    """Whether a server could bind ``port`` on 127.0.0.1 now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on now, below the kernel's ephemeral range: a port picked from
    that range can be taken, between the pick and the server's bind, as the local end of any
    outgoing connection on the machine (a busy machine makes thousands), while a port below it
    is only ever taken by a bind. Never one this process handed out before. A race with
    another process binding it is still possible, but the servers are started at once."""
    low = _ephemeral_low()
    if low - LOWEST >= 1_000:
        for _ in range(100):
            port = _PICK.randrange(LOWEST, low)
            if port not in _GIVEN and bindable(port):
                _GIVEN.add(port)
                return port
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            chosen: int = sock.getsockname()[1]
        if chosen not in _GIVEN:
            _GIVEN.add(chosen)
            return chosen
