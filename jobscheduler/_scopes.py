"""Small trio helpers shared by roles and adapters (a leaf module: imports only trio)."""

from __future__ import annotations

import math
from typing import TypeVar

import trio

T = TypeVar("T")


def shielded(timeout: float) -> trio.CancelScope:
    """A scope that outer cancellation cannot enter, bounded by its own ``timeout``: for
    writing a final status, resigning or closing during shutdown (one scope, not two).
    ``cancelled_caught`` tells whether the timeout cut it short."""
    return trio.CancelScope(shield=True, deadline=trio.current_time() + timeout)


def take_ready(channel: trio.MemoryReceiveChannel[T], limit: float = math.inf) -> list[T]:
    """Up to ``limit`` items already waiting in ``channel``, without waiting (a closed or
    finished channel has none)."""
    ready: list[T] = []
    while len(ready) < limit:
        try:
            ready.append(channel.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            break
    return ready
