"""The Bus adapters under contract test, and the helpers the bus tests share.

A harness builds and inspects one adapter; its capabilities (``redelivers_unacked``,
``max_in_flight``) state how the adapters differ, so test bodies never branch on a name
(see test_bus_contract.py). The Kafka harness needs the broker at ``KAFKA_BROKERS``
(``scripts/deps.sh up``); it fails, never skips, when the broker is unreachable.
"""

from __future__ import annotations

import abc
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from jobscheduler.bus import Bus, Delivery, Subscription, WakeUp
from jobscheduler.bus.base import dispatch_topic, dlq_topic
from jobscheduler.bus.kafka import KafkaBus
from jobscheduler.bus.local import LocalBus

KAFKA_BROKERS = os.environ.get("KAFKA_BROKERS", "127.0.0.1:9092")
#: Upper bound on waiting for any one expected delivery (a Kafka group join included).
RECEIVE_TIMEOUT = 30.0


def new_type() -> str:
    """A job type no other test (or earlier run) uses: its own topic and group."""
    return f"contract-{uuid.uuid4().hex[:12]}"


def new_id() -> str:
    return uuid.uuid4().hex


# -- adapters under test -------------------------------------------------------------------


class BusHarness(abc.ABC):
    """How the suite builds and inspects one adapter; test bodies never branch on its name."""

    #: Un-acked messages reach the next subscription of the group (see the module docstring).
    redelivers_unacked: bool
    #: Un-acked deliveries one subscription holds before it stops receiving, or None.
    max_in_flight: int | None

    @abc.abstractmethod
    async def open_bus(self) -> Bus:
        """A started bus."""

    @abc.abstractmethod
    async def open_bus_that_cannot_deliver(self) -> Bus:
        """A started bus whose publish must fail with BusError within the test's bound."""

    @abc.abstractmethod
    async def read_dead_letter(self, bus: Bus, job_id: str) -> dict[str, Any]:
        """The JSON body of the dead letter for ``job_id``, as an outside reader sees it."""

    @abc.abstractmethod
    async def inject_malformed(self, job_type: str, key: str) -> None:
        """Put a message that is not a wake-up on the type's stream, if the adapter can."""

    @abc.abstractmethod
    async def settle(self, *subscriptions: Subscription) -> None:
        """Wait until the subscriptions of one group have divided the stream among them."""


class LocalHarness(BusHarness):
    redelivers_unacked = False
    max_in_flight = None

    async def open_bus(self) -> Bus:
        bus = LocalBus()
        await bus.start()
        return bus

    async def open_bus_that_cannot_deliver(self) -> Bus:
        # An in-process channel cannot be unreachable; a closed bus is its one failure mode.
        bus = await self.open_bus()
        await bus.close()
        return bus

    async def read_dead_letter(self, bus: Bus, job_id: str) -> dict[str, Any]:
        assert isinstance(bus, LocalBus)
        await trio.lowlevel.checkpoint()
        found = [letter for letter in bus.dead_letters if letter.job_id == job_id]
        assert found, f"no dead letter for {job_id}"
        body: dict[str, Any] = json.loads(found[-1].encode())
        return body

    async def inject_malformed(self, job_type: str, key: str) -> None:
        # Local messages are WakeUp objects: there are no bytes that could be malformed.
        await trio.lowlevel.checkpoint()

    async def settle(self, *subscriptions: Subscription) -> None:
        await trio.lowlevel.checkpoint()


class KafkaHarness(BusHarness):
    redelivers_unacked = True
    max_in_flight = 8
    partitions = 2

    def __init__(self, brokers: str, topic_prefix: str) -> None:
        self.brokers = brokers
        self.topic_prefix = topic_prefix

    async def check_reachable(self) -> None:
        def probe() -> None:
            AdminClient({"bootstrap.servers": self.brokers}).list_topics(timeout=5)

        try:
            await trio.to_thread.run_sync(probe)
        except KafkaException as exc:
            pytest.fail(
                f"Kafka broker at {self.brokers} is unreachable ({exc}); "
                "start it with `scripts/deps.sh up` or set KAFKA_BROKERS"
            )

    async def open_bus(self) -> Bus:
        bus = KafkaBus(
            self.brokers,
            partitions=self.partitions,
            client_id="contract-tests",
            poll_timeout=0.1,
            max_in_flight_per_subscription=self.max_in_flight,
            topic_prefix=self.topic_prefix,
        )
        await bus.start()
        return bus

    async def open_bus_that_cannot_deliver(self) -> Bus:
        bus = KafkaBus("127.0.0.1:1", message_timeout=3.0)
        await bus.start()
        return bus

    async def read_dead_letter(self, bus: Bus, job_id: str) -> dict[str, Any]:
        consumer = Consumer(
            {
                "bootstrap.servers": self.brokers,
                "group.id": f"contract-dlq-reader-{uuid.uuid4().hex}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            topic = dlq_topic(self.topic_prefix)
            await trio.to_thread.run_sync(consumer.subscribe, [topic])
            with trio.fail_after(RECEIVE_TIMEOUT):
                while True:
                    msg = await trio.to_thread.run_sync(consumer.poll, 0.2)
                    if msg is not None and msg.error() is None and msg.key() == job_id.encode():
                        value = msg.value()
                        assert value is not None
                        body: dict[str, Any] = json.loads(value)
                        return body
        finally:
            await trio.to_thread.run_sync(consumer.close)

    async def inject_malformed(self, job_type: str, key: str) -> None:
        def produce() -> None:
            producer = Producer({"bootstrap.servers": self.brokers, "acks": "all"})
            topic = dispatch_topic(job_type, self.topic_prefix)
            producer.produce(topic, key=key.encode(), value=b"{not a wake-up")
            assert producer.flush(10) == 0

        await trio.to_thread.run_sync(produce)

    async def settle(self, *subscriptions: Subscription) -> None:
        # The port does not expose assignments; the harness may look inside its adapter.
        with trio.fail_after(RECEIVE_TIMEOUT):
            while True:
                owned = [len(sub._book.parts) for sub in subscriptions]  # type: ignore[attr-defined]
                if all(owned) and sum(owned) == self.partitions:
                    return
                await trio.sleep(0.05)


ADAPTERS = [
    pytest.param("local", id="local"),
    pytest.param("kafka", id="kafka", marks=pytest.mark.integration),
]


# -- helpers -------------------------------------------------------------------------------


async def next_delivery(deliveries: AsyncIterator[Delivery]) -> Delivery:
    with trio.fail_after(RECEIVE_TIMEOUT):
        return await anext(deliveries)


async def receive_until(
    deliveries: AsyncIterator[Delivery], expected: Iterable[WakeUp], *, ack: bool = True
) -> list[WakeUp]:
    """Receive (and ack) until every expected message was seen; return all received."""
    missing = set(expected)
    received = []
    while missing:
        delivery = await next_delivery(deliveries)
        received.append(delivery.message)
        missing.discard(delivery.message)
        if ack:
            await delivery.ack()
    return received


def wake_ups(job_type: str, count: int) -> list[WakeUp]:
    return [WakeUp(job_id=new_id(), job_type=job_type, priority=i % 7 - 3) for i in range(count)]


def one_key(*priorities: int) -> list[WakeUp]:
    """Wake-ups of one new job type and one key (so one partition, in this order), one per
    priority given."""
    job_type, job_id = new_type(), new_id()
    return [WakeUp(job_id=job_id, job_type=job_type, priority=p) for p in priorities]


async def held_in_order(bus: Bus, sub: Subscription, sent: list[WakeUp]) -> list[Delivery]:
    """Publish ``sent`` (one key, so one partition) and take as many deliveries on ``sub``,
    unacked; they arrive in the order sent."""
    await bus.publish(sent)
    deliveries = aiter(sub)
    held = [await next_delivery(deliveries) for _ in sent]
    assert [d.message for d in held] == sent
    return held


async def received_on_resubscribing(bus: Bus, markers: list[WakeUp]) -> list[WakeUp]:
    """What a new subscription to the markers' job type receives (and acks) until
    ``markers``, published now, have all arrived: any redelivered message comes before the
    marker of its key."""
    async with bus.subscribe(markers[0].job_type) as sub:
        await bus.publish(markers)
        return await receive_until(aiter(sub), markers)


async def held_up_to_the_limit(
    harness: BusHarness, bus: Bus, deliveries: AsyncIterator[Delivery], sent: list[WakeUp]
) -> list[Delivery]:
    """Publish ``sent`` and take its deliveries, unsettled, up to the bus's in-flight limit
    (all of them on a bus without one)."""
    await bus.publish(sent)
    limit = harness.max_in_flight
    held: list[Delivery] = []
    while len(held) < (limit if limit is not None else len(sent)):
        held.append(await next_delivery(deliveries))
    return held
