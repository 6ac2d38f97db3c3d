"""Producing through confluent-kafka: one batch per call, delivery reports awaited in hops."""

from __future__ import annotations

import logging
import threading
import time

import trio
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from jobscheduler.errors import BusError

from ._common import CLOSE_TIMEOUT, DELIVERY_GRACE, HOP, bus_error

log = logging.getLogger(__name__)

#: (topic, key, value)
Record = tuple[str, bytes, bytes]


class _DeliveryReports:
    """Delivery-report bookkeeping of one publish call.

    Callbacks are served by whichever thread polls the producer (concurrent publishes serve
    each other's reports), hence the lock.
    """

    def __init__(self, expected: int) -> None:
        self._lock = threading.Lock()
        self.remaining = expected
        self.failures: list[str] = []

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            self.remaining -= 1
            if err is not None:
                self.failures.append(f"{msg.topic()}: {err.name()} ({err.str()})")


async def produce(
    producer: Producer,
    records: list[Record],
    *,
    message_timeout: float,
    limiter: trio.CapacityLimiter,
) -> None:
    """Produce every record, then wait (in short hops) for all delivery reports.

    Returns once the broker acknowledged every record; raises BusError if any failed or was
    not confirmed within ``message_timeout`` plus a grace.
    """
    reports = _DeliveryReports(len(records))

    def produce_all() -> None:
        for topic, key, value in records:
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=reports.on_delivery)
                    break
                except BufferError:  # local queue full: serve reports to drain it
                    producer.poll(0.05)
        wait_reports()

    def wait_reports() -> None:
        until = time.monotonic() + HOP
        while reports.remaining > 0 and time.monotonic() < until:
            producer.poll(0.05)

    with trio.move_on_after(message_timeout + DELIVERY_GRACE):
        try:
            await trio.to_thread.run_sync(produce_all, limiter=limiter)
            while reports.remaining > 0:
                await trio.to_thread.run_sync(wait_reports, limiter=limiter)
        except KafkaException as exc:
            raise bus_error("publish failed", exc) from exc
    if reports.failures:
        raise BusError(
            f"{len(reports.failures)} of {len(records)} messages not delivered; "
            f"first: {reports.failures[0]}"
        )
    if reports.remaining > 0:
        raise BusError(f"{reports.remaining} of {len(records)} messages not confirmed in time")


def flush_and_close(producer: Producer) -> None:
    """Flush (bounded well below CLOSE_TIMEOUT), then drop what is left and close."""
    remaining = producer.flush(min(5.0, CLOSE_TIMEOUT / 2))
    if remaining:
        log.warning("messages dropped at close", extra={"count": remaining})
        producer.purge()
        producer.poll(0)
    producer.close()
