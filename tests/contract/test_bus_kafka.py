"""Kafka-only behaviour of the bus beyond the shared contract (test_bus_contract.py):
topic prefixes that keep deployments apart, and a consumer that dropped out of its group.

Needs the broker at ``KAFKA_BROKERS`` (``scripts/deps.sh up``); fails, never skips, when it
is unreachable.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from confluent_kafka.admin import AdminClient

from jobscheduler.bus import DeadLetter, Subscription, WakeUp
from jobscheduler.bus.base import dispatch_topic, dlq_topic
from jobscheduler.bus.kafka import KafkaBus, delete_prefixed_topics

from .bus_fixtures import (
    KAFKA_BROKERS,
    RECEIVE_TIMEOUT,
    KafkaHarness,
    new_id,
    new_type,
    next_delivery,
    receive_until,
    wake_ups,
)


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


@contextlib.asynccontextmanager
async def running_kafka_bus(prefix: str, **options: Any) -> AsyncIterator[KafkaBus]:
    """A started :func:`kafka_bus` (the broker checked reachable first), closed on exit."""
    await KafkaHarness(KAFKA_BROKERS, prefix).check_reachable()
    bus = kafka_bus(prefix, **options)
    await bus.start()
    try:
        yield bus
    finally:
        await bus.close()


async def leave_group_under(sub: Subscription) -> None:
    """Make the subscription's consumer leave its group for good, as a consumer does whose
    membership was lost and that never rejoins: a real LeaveGroup, no more assignments."""
    consumer = sub._consumer  # type: ignore[attr-defined]
    await trio.to_thread.run_sync(consumer.unsubscribe)


@pytest.mark.integration
async def test_kafka_consumer_that_left_its_group_is_replaced_and_receives_again(
    kafka_topic_prefix: str,
) -> None:
    """Regression: an executor's consumer dropped out of its group and never rejoined (the group
    stayed EMPTY for minutes). The subscription notices it is not a member and replaces its
    consumer within ``rejoin_timeout`` plus a join; deliveries then flow again."""
    job_type = new_type()
    async with (
        running_kafka_bus(kafka_topic_prefix, rejoin_timeout=3.0, unhealthy_after=60.0) as bus,
        bus.subscribe(job_type) as sub,
    ):
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
    # rejoin_timeout (3 s) + a membership check + a KIP-848 join: seconds, not minutes.
    assert recovered_in < 20, f"recovered after {recovered_in:.1f}s"


@pytest.mark.integration
async def test_kafka_subscription_reports_a_problem_while_it_is_not_a_group_member(
    kafka_topic_prefix: str,
) -> None:
    job_type = new_type()
    async with (
        running_kafka_bus(kafka_topic_prefix, rejoin_timeout=120.0, unhealthy_after=2.0) as bus,
        bus.subscribe(job_type) as sub,
    ):
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


@pytest.mark.integration
async def test_kafka_member_holding_no_partitions_is_healthy_and_kept(
    kafka_topic_prefix: str,
) -> None:
    """More consumers than partitions: the spare one holds nothing, yet it is a member (its
    statistics show its heartbeats answered; the test broker asks for one every 2 s), so it
    is neither replaced nor reported."""
    job_type = new_type()
    async with (
        running_kafka_bus(kafka_topic_prefix, rejoin_timeout=5.0, unhealthy_after=5.0) as bus,
        contextlib.AsyncExitStack() as stack,
    ):
        subs = [await stack.enter_async_context(bus.subscribe(job_type)) for _ in range(3)]
        with trio.fail_after(RECEIVE_TIMEOUT):
            while True:
                if sum(len(s._book.parts) for s in subs) == 2:  # type: ignore[attr-defined]
                    break
                await trio.sleep(0.05)
        await trio.sleep(9.0)  # well past rejoin_timeout and unhealthy_after
        owned = [len(s._book.parts) for s in subs]  # type: ignore[attr-defined]
        assert sorted(owned) == [0, 1, 1]
        assert [s.problem() for s in subs] == [None, None, None]
        assert [s.recreations for s in subs] == [0, 0, 0]  # type: ignore[attr-defined]
