"""Small trio helpers shared by roles and adapters (a leaf module: imports only trio)."""

from __future__ import annotations

import trio


def shielded(timeout: float) -> trio.CancelScope:
    """A scope that outer cancellation cannot enter, bounded by its own ``timeout``: for
    writing a final status, resigning or closing during shutdown (one scope, not two).
    ``cancelled_caught`` tells whether the timeout cut it short."""
    return trio.CancelScope(shield=True, deadline=trio.current_time() + timeout)
