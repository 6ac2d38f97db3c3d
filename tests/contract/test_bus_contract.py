"""The Bus contract: ONE suite, run against every adapter.

What the roles rely on: wake-ups reach the subscribers of their type (and only those),
competing subscribers of a type share the stream without losing anything, delivery is
at-least-once across subscriptions (an offset is committed only past contiguous acks), a
receive step can be timed out without losing a message, dead letters are published,
failures surface as BusError, and shutdown is orderly.

The adapters differ in what "a crash" can lose, and the suite states that difference as
capabilities of the harness instead of skipping:

- ``redelivers_unacked``: Kafka keeps un-acked messages and hands them to the next
  subscription of the group. The local bus never redelivers: a message leaves its channel
  exactly once and cannot be lost while the process lives; if the process dies, the reaper
  re-pends the queued job (the store, not the bus, is the source of truth).
- ``max_in_flight``: Kafka pauses a subscription with that many un-acked deliveries; the
  local bus is unbounded (``None``).

The Kafka parametrisation needs the broker at ``KAFKA_BROKERS`` (``scripts/deps.sh up``);
it fails, never skips, when the broker is unreachable.
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from jobscheduler.bus import Bus, DeadLetter, Delivery, Subscription, WakeUp
from jobscheduler.bus.base import dispatch_topic, dlq_topic
from jobscheduler.bus.kafka import KafkaBus, delete_prefixed_topics
from jobscheduler.bus.local import LocalBus
from jobscheduler.errors import BusError

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


@pytest.fixture(scope="module")
def kafka_topic_prefix() -> Iterator[str]:
    """This module run's topic prefix; its topics are deleted afterwards."""
    prefix = f"contract-{uuid.uuid4().hex[:8]}."
    yield prefix
    with contextlib.suppress(BusError):  # the broker was unreachable: the tests said so
        delete_prefixed_topics(KAFKA_BROKERS, prefix, timeout=10)


@pytest.fixture(params=ADAPTERS)
async def harness(request: pytest.FixtureRequest) -> BusHarness:
    if request.param == "local":
        return LocalHarness()
    kafka = KafkaHarness(KAFKA_BROKERS, request.getfixturevalue("kafka_topic_prefix"))
    await kafka.check_reachable()
    return kafka


@pytest.fixture
async def bus(harness: BusHarness) -> AsyncIterator[Bus]:
    adapter = await harness.open_bus()
    try:
        yield adapter
    finally:
        await adapter.close()


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


# -- the contract --------------------------------------------------------------------------


async def test_wakeups_reach_subscribers_of_their_own_type_intact(bus: Bus) -> None:
    mine, other = new_type(), new_type()
    sent = [
        WakeUp(job_id=new_id(), job_type=mine, priority=5),
        WakeUp(job_id=new_id(), job_type=mine, priority=0),
        WakeUp(job_id=new_id(), job_type=mine, priority=-3),
    ]
    sent_other = WakeUp(job_id=new_id(), job_type=other, priority=9)
    async with bus.subscribe(mine) as sub, bus.subscribe(other) as sub_other:
        deliveries = aiter(sub)
        await bus.publish([sent[0], sent_other, sent[1], sent[2]])
        received = await receive_until(deliveries, sent)
        # Same key = same partition, so everything published before the marker precedes it.
        marker = WakeUp(job_id=sent[2].job_id, job_type=mine, priority=100)
        await bus.publish([marker])
        received += await receive_until(deliveries, [marker])
        received_other = await receive_until(aiter(sub_other), [sent_other])

    assert sorted(received, key=lambda m: m.priority) == [sent[2], sent[1], sent[0], marker]
    assert received_other == [sent_other]


async def test_subscribers_of_one_type_share_the_stream_and_lose_nothing(
    harness: BusHarness, bus: Bus
) -> None:
    job_type = new_type()
    sent = wake_ups(job_type, 40)
    per_subscriber: list[list[WakeUp]] = [[], []]
    all_seen = trio.Event()

    async def drain(sub: Subscription, sink: list[WakeUp]) -> None:
        async for delivery in sub:
            sink.append(delivery.message)
            await delivery.ack()
            if set(sent) <= {*per_subscriber[0], *per_subscriber[1]}:
                all_seen.set()

    async with bus.subscribe(job_type) as first, bus.subscribe(job_type) as second:
        await harness.settle(first, second)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain, first, per_subscriber[0])
            nursery.start_soon(drain, second, per_subscriber[1])
            await bus.publish(sent)
            with trio.fail_after(RECEIVE_TIMEOUT * 2):
                await all_seen.wait()
            nursery.cancel_scope.cancel()

    assert {*per_subscriber[0], *per_subscriber[1]} == set(sent)
    assert per_subscriber[0], "the first subscriber received nothing: the stream is not shared"
    assert per_subscriber[1], "the second subscriber received nothing: the stream is not shared"


async def test_unacked_message_goes_to_the_next_subscription_and_acked_one_does_not(
    harness: BusHarness, bus: Bus
) -> None:
    job_type = new_type()
    acked = WakeUp(job_id=new_id(), job_type=job_type, priority=1)
    unacked = WakeUp(job_id=new_id(), job_type=job_type, priority=2)
    async with bus.subscribe(job_type) as sub:
        await bus.publish([acked, unacked])
        deliveries = aiter(sub)
        by_message = {}
        while len(by_message) < 2:
            delivery = await next_delivery(deliveries)
            by_message[delivery.message] = delivery
        await by_message[acked].ack()

    # One marker per key: each follows its message in that message's partition, so once
    # both markers arrive, any redelivery of either message has arrived too.
    markers = [WakeUp(job_id=m.job_id, job_type=job_type, priority=100) for m in (acked, unacked)]
    async with bus.subscribe(job_type) as sub:
        await bus.publish(markers)
        received = await receive_until(aiter(sub), markers)

    assert acked not in received
    assert (unacked in received) == harness.redelivers_unacked


async def test_out_of_order_ack_never_commits_past_the_earlier_unacked_message(
    harness: BusHarness, bus: Bus
) -> None:
    job_type = new_type()
    job_id = new_id()  # one key, so one partition, in this order
    first, second, marker = (
        WakeUp(job_id=job_id, job_type=job_type, priority=p) for p in (1, 2, 100)
    )
    async with bus.subscribe(job_type) as sub:
        await bus.publish([first, second])
        deliveries = aiter(sub)
        d_first = await next_delivery(deliveries)
        d_second = await next_delivery(deliveries)
        assert [d_first.message, d_second.message] == [first, second]
        await d_second.ack()

    async with bus.subscribe(job_type) as sub:
        await bus.publish([marker])
        received = await receive_until(aiter(sub), [marker])

    # The second message may come again too (its offset is behind the uncommitted first).
    assert (first in received) == harness.redelivers_unacked
    if first in received:
        assert received.index(first) < received.index(marker)


async def test_acks_that_close_the_gap_commit_past_every_message(bus: Bus) -> None:
    job_type = new_type()
    job_id = new_id()
    sent = [WakeUp(job_id=job_id, job_type=job_type, priority=p) for p in (1, 2, 3)]
    marker = WakeUp(job_id=job_id, job_type=job_type, priority=100)
    async with bus.subscribe(job_type) as sub:
        await bus.publish(sent)
        deliveries = aiter(sub)
        held = [await next_delivery(deliveries) for _ in sent]
        assert [d.message for d in held] == sent
        for index in (2, 0, 1, 1):  # last, first, middle, and an ack repeated harmlessly
            await held[index].ack()

    async with bus.subscribe(job_type) as sub:
        await bus.publish([marker])
        received = await receive_until(aiter(sub), [marker])

    assert received == [marker]


async def test_released_message_is_settled_its_offset_committed_past_and_not_redelivered(
    bus: Bus,
) -> None:
    """``release`` is how an executor settles a message whose job's outcome it could not
    learn (the store failed): the bus moves on, and the store's sweeps recover the job."""
    job_type = new_type()
    job_id = new_id()  # one key, so one partition, in this order
    released, acked, marker = (
        WakeUp(job_id=job_id, job_type=job_type, priority=p) for p in (1, 2, 100)
    )
    async with bus.subscribe(job_type) as sub:
        await bus.publish([released, acked])
        deliveries = aiter(sub)
        d_released = await next_delivery(deliveries)
        d_acked = await next_delivery(deliveries)
        assert [d_released.message, d_acked.message] == [released, acked]
        await d_acked.ack()
        await d_released.release()
        await d_released.release()  # idempotent
        await d_acked.release()  # after an ack: a no-op

    async with bus.subscribe(job_type) as sub:
        await bus.publish([marker])
        received = await receive_until(aiter(sub), [marker])

    assert received == [marker]


async def test_releases_free_in_flight_room_like_acks(harness: BusHarness, bus: Bus) -> None:
    job_type = new_type()
    sent = wake_ups(job_type, 20)
    held: list[Delivery] = []
    async with bus.subscribe(job_type) as sub:
        deliveries = aiter(sub)
        await bus.publish(sent)
        limit = harness.max_in_flight
        while len(held) < (limit if limit is not None else len(sent)):
            held.append(await next_delivery(deliveries))
        for delivery in held:
            await delivery.release()
        rest = await receive_until(deliveries, set(sent) - {d.message for d in held})
    assert {d.message for d in held} | set(rest) == set(sent)


async def test_receive_ready_takes_what_has_arrived_without_waiting(bus: Bus) -> None:
    job_type = new_type()
    sent = wake_ups(job_type, 6)
    async with bus.subscribe(job_type) as sub:
        assert sub.receive_ready(10) == []
        await bus.publish(sent)
        deliveries = aiter(sub)
        received = [await next_delivery(deliveries)]
        with trio.fail_after(RECEIVE_TIMEOUT):
            while len(received) < len(sent):
                ready = sub.receive_ready(2)
                assert len(ready) <= 2
                received += ready
                if not ready:  # a broker hands messages over as its poller fetches them
                    await trio.sleep(0.01)
        assert sub.receive_ready(10) == []
        for delivery in received:
            await delivery.ack()

    assert sorted(d.message.job_id for d in received) == sorted(m.job_id for m in sent)


async def test_a_receive_cancelled_by_a_timeout_loses_nothing(bus: Bus) -> None:
    job_type = new_type()
    sent = wake_ups(job_type, 3)
    async with bus.subscribe(job_type) as sub:
        deliveries = aiter(sub)
        with trio.move_on_after(0.3) as timed_out:
            await anext(deliveries)
        assert timed_out.cancelled_caught, "received a message nobody published"
        await bus.publish(sent)
        received = await receive_until(deliveries, sent)
    assert sorted(received, key=lambda m: m.priority) == sorted(sent, key=lambda m: m.priority)


async def test_malformed_message_is_skipped_without_blocking_its_partition(
    harness: BusHarness, bus: Bus
) -> None:
    job_type = new_type()
    key = new_id()
    valid = WakeUp(job_id=key, job_type=job_type, priority=1)
    marker = WakeUp(job_id=key, job_type=job_type, priority=100)
    async with bus.subscribe(job_type) as sub:
        await harness.inject_malformed(job_type, key)
        await bus.publish([valid])
        assert await receive_until(aiter(sub), [valid]) == [valid]

    # Had the malformed message not been committed past, the valid one behind it would
    # come back before the marker.
    async with bus.subscribe(job_type) as sub:
        await bus.publish([marker])
        assert await receive_until(aiter(sub), [marker]) == [marker]


async def test_unacked_deliveries_are_bounded_and_flow_resumes_after_acks(
    harness: BusHarness, bus: Bus
) -> None:
    job_type = new_type()
    sent = wake_ups(job_type, 20)
    held: list[Delivery] = []
    async with bus.subscribe(job_type) as sub:
        deliveries = aiter(sub)
        await bus.publish(sent)
        limit = harness.max_in_flight
        while len(held) < (limit if limit is not None else len(sent)):
            held.append(await next_delivery(deliveries))
        if limit is not None:
            with trio.move_on_after(1.5):
                extra = await anext(deliveries)
                pytest.fail(f"delivery beyond the in-flight limit of {limit}: {extra.message}")
        for delivery in held:
            await delivery.ack()
        rest = await receive_until(deliveries, set(sent) - {d.message for d in held})
    assert {d.message for d in held} | set(rest) == set(sent)


async def test_dead_letter_is_published_to_the_dlq(harness: BusHarness, bus: Bus) -> None:
    letter = DeadLetter(
        job_id=new_id(),
        job_type=new_type(),
        tenant_id="tenant-a",
        attempts=3,
        last_error="boom: handler raised",
    )
    await bus.publish_dead_letter(letter)
    body = await harness.read_dead_letter(bus, letter.job_id)
    assert body == {
        "jobId": letter.job_id,
        "jobType": letter.job_type,
        "tenantId": "tenant-a",
        "attempts": 3,
        "lastError": "boom: handler raised",
    }


async def test_publish_raises_bus_error_when_it_cannot_deliver(harness: BusHarness) -> None:
    broken = await harness.open_bus_that_cannot_deliver()
    started = time.monotonic()
    try:
        with trio.fail_after(20), pytest.raises(BusError):
            await broken.publish([WakeUp(job_id=new_id(), job_type=new_type(), priority=0)])
    finally:
        await broken.close()
    assert time.monotonic() - started < 15


async def test_a_publish_that_cannot_complete_is_cancelled_promptly(
    harness: BusHarness,
) -> None:
    broken = await harness.open_bus_that_cannot_deliver()
    try:
        started = trio.current_time()
        # Failing at once with BusError is prompt too.
        with trio.move_on_after(0.5), contextlib.suppress(BusError):
            await broken.publish([WakeUp(job_id=new_id(), job_type=new_type(), priority=0)])
        assert trio.current_time() - started < 1.5
    finally:
        await broken.close()


async def test_close_lets_running_publishes_finish_or_fail_with_bus_error(
    harness: BusHarness,
) -> None:
    bus = await harness.open_bus()
    job_type = new_type()
    await bus.publish(wake_ups(job_type, 1))  # the topic exists: publishes are under way
    outcomes: list[str] = []

    async def publish() -> None:
        try:
            await bus.publish(wake_ups(job_type, 200))
        except BusError:
            outcomes.append("BusError")
        else:
            outcomes.append("ok")

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(publish)
        await trio.sleep(0.01)
        await bus.close()
    assert len(outcomes) == 5


async def test_publish_after_close_raises_bus_error(harness: BusHarness) -> None:
    bus = await harness.open_bus()
    await bus.close()
    with pytest.raises(BusError):
        await bus.publish([WakeUp(job_id=new_id(), job_type=new_type(), priority=0)])
    with pytest.raises(BusError):
        await bus.publish_dead_letter(
            DeadLetter(job_id=new_id(), job_type="x", tenant_id="t", attempts=1, last_error=None)
        )


async def test_publishing_nothing_is_a_no_op(bus: Bus) -> None:
    await bus.publish([])


async def test_iteration_ends_when_the_bus_is_closed(harness: BusHarness) -> None:
    bus = await harness.open_bus()
    job_type = new_type()
    sent = wake_ups(job_type, 2)
    try:
        async with bus.subscribe(job_type) as sub:
            await bus.publish(sent)
            received = await receive_until(aiter(sub), sent)
            await bus.close()
            with trio.fail_after(10):
                async for delivery in sub:
                    received.append(delivery.message)
    finally:
        await bus.close()
    assert set(received) == set(sent)


async def test_closing_the_bus_twice_is_harmless(harness: BusHarness) -> None:
    bus = await harness.open_bus()
    await bus.publish(wake_ups(new_type(), 1))
    await bus.close()
    await bus.close()


# -- Kafka only ----------------------------------------------------------------------------


@pytest.mark.integration
async def test_kafka_topic_prefix_keeps_deployments_on_one_broker_apart(
    kafka_topic_prefix: str,
) -> None:
    """Two buses with different KAFKA_TOPIC_PREFIX share a broker and a job type, yet each
    subscriber sees only its own deployment's wake-ups, and dead letters go to the prefixed
    DLQ topic."""
    await KafkaHarness(KAFKA_BROKERS, kafka_topic_prefix).check_reachable()
    job_type = new_type()
    prefixes = [f"{kafka_topic_prefix}{side}." for side in ("a", "b")]
    buses = [
        KafkaBus(KAFKA_BROKERS, partitions=2, poll_timeout=0.1, topic_prefix=p) for p in prefixes
    ]
    async with contextlib.AsyncExitStack() as stack:
        for bus in buses:
            await bus.start()
            stack.push_async_callback(bus.close)
        first, second = buses
        theirs = WakeUp(job_id=new_id(), job_type=job_type, priority=1)
        await second.publish([theirs])
        # Same key, so the same partition: had ``theirs`` reached the first deployment's
        # topic, it would be delivered there before this marker.
        marker = WakeUp(job_id=theirs.job_id, job_type=job_type, priority=100)
        await first.publish([marker])
        async with first.subscribe(job_type) as mine, second.subscribe(job_type) as other:
            assert (await next_delivery(aiter(mine))).message == marker
            assert (await next_delivery(aiter(other))).message == theirs
        letter = DeadLetter(
            job_id=new_id(), job_type=job_type, tenant_id="t", attempts=1, last_error="x"
        )
        await first.publish_dead_letter(letter)

    def topics() -> set[str]:
        listed = AdminClient({"bootstrap.servers": KAFKA_BROKERS}).list_topics(timeout=10)
        return set(listed.topics)

    existing = await trio.to_thread.run_sync(topics)
    assert {dispatch_topic(job_type, p) for p in prefixes} <= existing
    assert dlq_topic(prefixes[0]) in existing
    assert dispatch_topic(job_type) not in existing


def test_deleting_topics_by_prefix_refuses_an_empty_prefix() -> None:
    with pytest.raises(ValueError, match="prefix"):
        delete_prefixed_topics("127.0.0.1:1", "")


def kafka_bus(prefix: str, **options: Any) -> KafkaBus:
    return KafkaBus(
        KAFKA_BROKERS, partitions=2, client_id="contract-tests", poll_timeout=0.1,
        topic_prefix=prefix, **options,
    )  # fmt: skip


async def leave_group_under(sub: Subscription) -> None:
    """Make the subscription's consumer leave its group for good, as a consumer does whose
    membership was lost and that never rejoins: a real LeaveGroup, no more assignments."""
    consumer = sub._consumer  # type: ignore[attr-defined]
    await trio.to_thread.run_sync(consumer.unsubscribe)


@pytest.mark.integration
async def test_kafka_consumer_that_left_its_group_is_replaced_and_receives_again(
    kafka_topic_prefix: str,
) -> None:
    """Issue 8: an executor's consumer dropped out of its group and never rejoined (the group
    stayed EMPTY for minutes). The subscription notices it is not a member and replaces its
    consumer within ``rejoin_timeout`` plus a join; deliveries then flow again."""
    await KafkaHarness(KAFKA_BROKERS, kafka_topic_prefix).check_reachable()
    job_type = new_type()
    bus = kafka_bus(kafka_topic_prefix, rejoin_timeout=3.0, unhealthy_after=60.0)
    await bus.start()
    try:
        async with bus.subscribe(job_type) as sub:
            await KafkaHarness(KAFKA_BROKERS, kafka_topic_prefix).settle(sub)
            before = wake_ups(job_type, 3)
            await bus.publish(before)
            await receive_until(aiter(sub), before)

            await leave_group_under(sub)
            left = time.monotonic()
            after = wake_ups(job_type, 3)
            await bus.publish(after)
            await receive_until(aiter(sub), after)
            recovered_in = time.monotonic() - left
            assert sub.recreations == 1  # type: ignore[attr-defined]
            assert sub.problem() is None
    finally:
        await bus.close()
    # rejoin_timeout (3 s) + a membership check + a KIP-848 join: seconds, not minutes.
    assert recovered_in < 20, f"recovered after {recovered_in:.1f}s"


@pytest.mark.integration
async def test_kafka_subscription_reports_a_problem_while_it_is_not_a_group_member(
    kafka_topic_prefix: str,
) -> None:
    await KafkaHarness(KAFKA_BROKERS, kafka_topic_prefix).check_reachable()
    job_type = new_type()
    bus = kafka_bus(kafka_topic_prefix, rejoin_timeout=120.0, unhealthy_after=2.0)
    await bus.start()
    try:
        async with bus.subscribe(job_type) as sub:
            await KafkaHarness(KAFKA_BROKERS, kafka_topic_prefix).settle(sub)
            assert sub.problem() is None
            await leave_group_under(sub)
            with trio.fail_after(RECEIVE_TIMEOUT):
                while True:  # the subscription is polled, as a health check would
                    problem = sub.problem()
                    if problem is not None:
                        break
                    await trio.sleep(0.1)
            assert "not been a member of group" in problem
    finally:
        await bus.close()


@pytest.mark.integration
async def test_kafka_member_holding_no_partitions_is_healthy_and_kept(
    kafka_topic_prefix: str,
) -> None:
    """More consumers than partitions: the spare one holds nothing, yet it is a member (the
    coordinator lists it), so it is neither replaced nor reported."""
    await KafkaHarness(KAFKA_BROKERS, kafka_topic_prefix).check_reachable()
    job_type = new_type()
    bus = kafka_bus(kafka_topic_prefix, rejoin_timeout=1.5, unhealthy_after=1.5)
    await bus.start()
    try:
        async with contextlib.AsyncExitStack() as stack:
            subs = [await stack.enter_async_context(bus.subscribe(job_type)) for _ in range(3)]
            with trio.fail_after(RECEIVE_TIMEOUT):
                while True:
                    if sum(len(s._book.parts) for s in subs) == 2:  # type: ignore[attr-defined]
                        break
                    await trio.sleep(0.05)
            await trio.sleep(4.0)  # well past rejoin_timeout and unhealthy_after
            owned = [len(s._book.parts) for s in subs]  # type: ignore[attr-defined]
            assert sorted(owned) == [0, 1, 1]
            assert [s.problem() for s in subs] == [None, None, None]
            assert [s.recreations for s in subs] == [0, 0, 0]  # type: ignore[attr-defined]
    finally:
        await bus.close()
