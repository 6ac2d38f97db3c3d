"""The Bus contract: ONE suite (this module and test_bus_publish.py), run against every adapter.

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

This module holds delivery (routing, sharing, acks and releases, receive steps, malformed
messages, flow control); test_bus_publish.py publishing, dead letters and shutdown.

The Kafka parametrisation needs the broker at ``KAFKA_BROKERS`` (``scripts/deps.sh up``);
it fails, never skips, when the broker is unreachable. The harnesses are in bus_fixtures.py,
their fixtures in conftest.py, the Kafka-only tests in test_bus_kafka.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import trio

from jobscheduler.bus import Bus, Subscription, WakeUp
from jobscheduler.errors import BusError

from .bus_fixtures import (
    RECEIVE_TIMEOUT,
    BusHarness,
    held_in_order,
    held_up_to_the_limit,
    new_id,
    new_type,
    next_delivery,
    one_key,
    receive_until,
    received_on_resubscribing,
    wake_ups,
)

# -- the contract --------------------------------------------------------------------------


START = datetime(2026, 12, 1, 8, 30, 0, 123000, tzinfo=UTC)


def test_a_wake_up_with_a_start_instant_that_is_not_unix_milliseconds_is_malformed() -> None:
    good = WakeUp(job_id="j", job_type="t", priority=0, not_before=START)
    assert WakeUp.decode(good.encode()) == good
    assert json.loads(good.encode())["notBefore"] == 1_796_113_800_123
    for bad in ('"soon"', "1.5", "true"):
        data = f'{{"jobId": "j", "jobType": "t", "notBefore": {bad}}}'.encode()
        with pytest.raises(BusError, match="notBefore must be Unix milliseconds"):
            WakeUp.decode(data)


async def test_wakeups_reach_subscribers_of_their_own_type_intact(bus: Bus) -> None:
    mine, other = new_type(), new_type()
    sent = [
        WakeUp(job_id=new_id(), job_type=mine, priority=5),
        # A start instant (a job claimed ahead under a rate limit) comes through to the ms.
        WakeUp(job_id=new_id(), job_type=mine, priority=0, not_before=START),
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
    received = await received_on_resubscribing(bus, markers)

    assert acked not in received
    assert (unacked in received) == harness.redelivers_unacked


async def test_out_of_order_ack_never_commits_past_the_earlier_unacked_message(
    harness: BusHarness, bus: Bus
) -> None:
    first, second, marker = one_key(1, 2, 100)
    async with bus.subscribe(first.job_type) as sub:
        _, d_second = await held_in_order(bus, sub, [first, second])
        await d_second.ack()

    received = await received_on_resubscribing(bus, [marker])

    # The second message may come again too (its offset is behind the uncommitted first).
    assert (first in received) == harness.redelivers_unacked
    if first in received:
        assert received.index(first) < received.index(marker)


async def test_acks_that_close_the_gap_commit_past_every_message(bus: Bus) -> None:
    *sent, marker = one_key(1, 2, 3, 100)
    async with bus.subscribe(marker.job_type) as sub:
        held = await held_in_order(bus, sub, sent)
        for index in (2, 0, 1, 1):  # last, first, middle, and an ack repeated harmlessly
            await held[index].ack()

    received = await received_on_resubscribing(bus, [marker])

    assert received == [marker]


async def test_released_message_is_settled_its_offset_committed_past_and_not_redelivered(
    bus: Bus,
) -> None:
    """``release`` is how an executor settles a message whose job's outcome it could not
    learn (the store failed): the bus moves on, and the store's sweeps recover the job."""
    released, acked, marker = one_key(1, 2, 100)
    async with bus.subscribe(released.job_type) as sub:
        d_released, d_acked = await held_in_order(bus, sub, [released, acked])
        await d_acked.ack()
        await d_released.release()
        await d_released.release()  # idempotent
        await d_acked.release()  # after an ack: a no-op

    received = await received_on_resubscribing(bus, [marker])

    assert received == [marker]


async def test_releases_free_in_flight_room_like_acks(harness: BusHarness, bus: Bus) -> None:
    job_type = new_type()
    sent = wake_ups(job_type, 20)
    async with bus.subscribe(job_type) as sub:
        deliveries = aiter(sub)
        held = await held_up_to_the_limit(harness, bus, deliveries, sent)
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
    assert await received_on_resubscribing(bus, [marker]) == [marker]


async def test_unacked_deliveries_are_bounded_and_flow_resumes_after_acks(
    harness: BusHarness, bus: Bus
) -> None:
    job_type = new_type()
    sent = wake_ups(job_type, 20)
    async with bus.subscribe(job_type) as sub:
        deliveries = aiter(sub)
        held = await held_up_to_the_limit(harness, bus, deliveries, sent)
        limit = harness.max_in_flight
        if limit is not None:
            with trio.move_on_after(1.5):
                extra = await anext(deliveries)
                pytest.fail(f"delivery beyond the in-flight limit of {limit}: {extra.message}")
        for delivery in held:
            await delivery.ack()
        rest = await receive_until(deliveries, set(sent) - {d.message for d in held})
    assert {d.message for d in held} | set(rest) == set(sent)
