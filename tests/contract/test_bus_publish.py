"""The Bus contract, publishing and shutdown (the rest of the suite is test_bus_contract.py),
run against every adapter: dead letters are published to the DLQ, a publish that cannot
deliver raises BusError or is cancelled promptly, close lets running publishes finish or
fail, and closing ends iteration and is harmless twice."""

from __future__ import annotations

import contextlib
import time

import pytest
import trio

from jobscheduler.bus import Bus, DeadLetter, WakeUp
from jobscheduler.errors import BusError

from .bus_fixtures import (
    BusHarness,
    new_id,
    new_type,
    receive_until,
    wake_ups,
)


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
