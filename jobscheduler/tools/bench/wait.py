"""Waiting for another process's completions, read from its metrics listener.

There is no event to wait on, so the bench polls; each scrape costs the measured process
about 2 ms of its event loop (every metric rendered). Polling every 20 ms through a drain took
5-9 % of `dev`'s CPU, so :func:`until_completed` polls seldom while the end is far (from the
rate seen so far) and every :data:`FINE` seconds near it: a drain's end is seen as precisely
as before, at a fraction of the scrapes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

#: The finest pause between two scrapes (how precisely a drain's end is seen).
FINE = 0.02
#: The longest pause between two scrapes.
COARSE = 0.25


def next_pause(done: float, target: float, rate: float) -> float:
    """Seconds to wait before the next scrape: a third of the time the rest should take at
    ``rate`` (completions a second, as last seen), between :data:`FINE` and :data:`COARSE`."""
    if rate <= 0:
        return COARSE
    return min(COARSE, max(FINE, (target - done) / rate / 3))


async def until_completed(completed: Callable[[], Awaitable[float]], target: float) -> None:
    """Wait until ``completed()`` reaches ``target`` (the caller bounds the wait)."""
    done, at = await completed(), trio.current_time()
    rate = 0.0
    while done < target:
        await trio.sleep(next_pause(done, target, rate))
        now_done, now = await completed(), trio.current_time()
        rate = (now_done - done) / (now - at) if now > at else 0.0
        done, at = now_done, now
