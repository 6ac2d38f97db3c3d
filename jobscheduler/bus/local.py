"""The in-process bus of the single-process deployment: trio memory channels per job type.

Messages live in memory only; a crash loses them, which costs latency, never a job (the
reaper re-pends queued jobs after QUEUED_TIMEOUT).
"""

from __future__ import annotations

import collections
import logging
import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio

from jobscheduler._scopes import take_ready
from jobscheduler.errors import BusError

from .base import Bus, DeadLetter, Delivery, Subscription, WakeUp

log = logging.getLogger(__name__)

DEAD_LETTERS_KEPT = 1000


class _LocalDelivery(Delivery):
    def __init__(self, message: WakeUp) -> None:
        self.message = message

    async def ack(self) -> None:
        await trio.lowlevel.checkpoint()

    async def release(self) -> None:
        # Nothing to commit and no in-flight limit: the message already left its channel.
        await trio.lowlevel.checkpoint()


class _LocalSubscription(Subscription):
    # An iterator object rather than an async generator: a receive cancelled by a timeout
    # (or an abandoned ``async for``) neither finishes the iterator nor leaves an
    # un-finalized generator behind for trio to warn about.
    def __init__(self, receive: trio.MemoryReceiveChannel[WakeUp]) -> None:
        self._receive = receive

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self

    async def __anext__(self) -> Delivery:
        try:
            message = await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None
        return _LocalDelivery(message)

    def receive_ready(self, limit: int) -> list[Delivery]:
        return [_LocalDelivery(message) for message in take_ready(self._receive, limit)]


class LocalBus(Bus):
    """One unbounded channel per job type; one group per type (competing consumers)."""

    durable = False

    def __init__(self) -> None:
        self._channels: dict[
            str, tuple[trio.MemorySendChannel[WakeUp], trio.MemoryReceiveChannel[WakeUp]]
        ] = {}
        self._closed = False
        #: The most recent dead letters, newest last (the in-process stand-in for jobs.dlq).
        self.dead_letters: collections.deque[DeadLetter] = collections.deque(
            maxlen=DEAD_LETTERS_KEPT
        )

    def _channel(
        self, job_type: str
    ) -> tuple[trio.MemorySendChannel[WakeUp], trio.MemoryReceiveChannel[WakeUp]]:
        if job_type not in self._channels:
            self._channels[job_type] = trio.open_memory_channel[WakeUp](math.inf)
        return self._channels[job_type]

    async def start(self) -> None:
        await trio.lowlevel.checkpoint()

    async def close(self) -> None:
        self._closed = True
        for send, _ in self._channels.values():
            send.close()
        await trio.lowlevel.checkpoint()

    async def publish(self, messages: Sequence[WakeUp]) -> None:
        if self._closed:
            raise BusError("bus is closed")
        for message in messages:
            self._channel(message.job_type)[0].send_nowait(message)
        await trio.lowlevel.checkpoint()

    async def publish_dead_letter(self, letter: DeadLetter) -> None:
        if self._closed:
            raise BusError("bus is closed")
        self.dead_letters.append(letter)
        log.info(
            "dead letter published",
            extra={"job_id": letter.job_id, "tenant": letter.tenant_id, "topic": "jobs.dlq"},
        )
        await trio.lowlevel.checkpoint()

    @asynccontextmanager
    async def subscribe(self, job_type: str) -> AsyncIterator[Subscription]:
        if self._closed:
            raise BusError("bus is closed")
        _, receive = self._channel(job_type)
        yield _LocalSubscription(receive.clone())
