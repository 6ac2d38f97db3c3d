"""Wake-ups for a later start: a job the leader claimed ahead of its start under a rate
limit (``RATE_AHEAD``) comes with the instant it may start (``WakeUp.not_before``).

The executor settles such a message when it arrives, so the bus partition behind it moves
on, keeps it here, and starts the job at its instant: the pick is conditioned on the job
still being queued for that instant (``states.pick(queued_for=...)``), so a wake-up of an
earlier claim of the job starts nothing. If the process stops first (drain cancels what
it holds), the job stays queued for its instant and the reaper re-pends it QUEUED_TIMEOUT
later.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

import trio

from jobscheduler.bus import Delivery, WakeUp
from jobscheduler.clock import Clock


class HeldWakeUp(Delivery):
    """A kept wake-up: its message was settled when it arrived, so settling it again does
    nothing."""

    def __init__(self, message: WakeUp) -> None:
        self.message = message

    async def ack(self) -> None:
        return None

    async def release(self) -> None:
        return None


class Holding:
    """The wake-ups one consumer keeps until their instants, in ``nursery``; ``start``
    starts one (as a received wake-up is started) when its instant comes."""

    def __init__(
        self, clock: Clock, nursery: trio.Nursery, start: Callable[[Delivery], Awaitable[None]]
    ) -> None:
        self._clock = clock
        self._nursery = nursery
        self._start = start

    def keep_if_ahead(self, delivery: Delivery) -> bool:
        """Keep ``delivery`` until its start instant if that is still ahead (True)."""
        not_before = delivery.message.not_before
        if not_before is None or not_before <= self._clock.now():
            return False
        self._nursery.start_soon(self._keep, delivery, not_before)
        return True

    async def _keep(self, delivery: Delivery, not_before: datetime) -> None:
        await delivery.ack()
        held = HeldWakeUp(delivery.message)
        await self._clock.sleep_until(not_before)
        await self._start(held)
