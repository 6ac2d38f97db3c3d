"""What one consumer of the executor holds at once (:class:`Slots`)."""

from __future__ import annotations

import trio

from jobscheduler.bus import Delivery


def messages_held(concurrency: int) -> int:
    """How many messages a consumer of ``concurrency`` running slots holds unsettled at
    most (the running ones, and as many again whose outcomes are being written while the
    next batch is picked): what its bus must deliver un-acked, or slots stay unused."""
    return 2 * concurrency


class Slots:
    """A consumer's two bounds: handlers running at once (EXECUTOR_CONCURRENCY), and
    messages received whose outcome is not yet written and acked (twice as many).

    A message's running slot is freed when its handler returns, its unsettled slot once it
    is settled. So the next batch is picked while the last outcomes are being written,
    and the store shares one round trip between the two instead of taking them in turn.
    """

    def __init__(self, concurrency: int) -> None:
        self._running = trio.CapacityLimiter(concurrency)
        self._unsettled = trio.CapacityLimiter(messages_held(concurrency))

    async def take(self, delivery: Delivery) -> None:
        await self._unsettled.acquire_on_behalf_of(delivery)
        await self._running.acquire_on_behalf_of(delivery)

    def free(self) -> int:
        """How many more messages may be taken without waiting."""
        return int(min(self._running.available_tokens, self._unsettled.available_tokens))

    def take_nowait(self, delivery: Delivery) -> None:
        self._unsettled.acquire_on_behalf_of_nowait(delivery)
        self._running.acquire_on_behalf_of_nowait(delivery)

    def stopped(self, delivery: Delivery) -> None:
        """The message's handler has returned, or was never started."""
        self._running.release_on_behalf_of(delivery)

    def settled(self, delivery: Delivery) -> None:
        """The message is acked or released (after :meth:`stopped`)."""
        self._unsettled.release_on_behalf_of(delivery)

    def release(self, delivery: Delivery) -> None:
        """Both slots at once: the message was released before its handler returned."""
        self.stopped(delivery)
        self.settled(delivery)
