"""The Kafka bus: lifecycle, publishing and topics; consuming is in ``consumer``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import trio
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from jobscheduler.bus.base import (
    Bus,
    DeadLetter,
    Subscription,
    WakeUp,
    consumer_group,
    dispatch_topic,
    dlq_topic,
)
from jobscheduler.errors import BusError
from jobscheduler.observability.logthrottle import LogThrottle

from ._common import CLOSE_TIMEOUT, bus_error, rdkafka_log
from .admin import create_topics
from .consumer import KafkaSubscription
from .membership import ConsumerOptions
from .producer import Record, flush_and_close, produce

log = logging.getLogger(__name__)

#: Longest pause between librdkafka's reconnects to a broker: after a network fault heals, the
#: next try comes within a second (its default grows to 10 s, so a long fault delayed the
#: recovery).
RECONNECT_BACKOFF_MAX_MS = 1000


class KafkaBus(Bus):
    """The Bus port on Kafka. See the module docstring for the threading/commit design.

    ``brokers`` is librdkafka's ``bootstrap.servers``; ``partitions`` applies to topics this
    bus creates; ``poll_timeout`` bounds each consumer poll (and so how late a stop is
    noticed); ``max_in_flight_per_subscription`` caps un-acked deliveries per subscription
    (also its channel size); ``message_timeout`` bounds each publish (``message.timeout.ms``,
    topic creation); ``group_protocol`` picks the consumer-group protocol; ``topic_prefix``
    is put before every topic and consumer-group name (see ``bus.base``);
    ``rejoin_timeout`` is how long a subscription may go without any sign of being a group
    member before its consumer is replaced, ``unhealthy_after`` how long until its
    ``problem()`` says so (see ``consumer``).
    """

    def __init__(
        self,
        brokers: str,
        *,
        partitions: int = 3,
        client_id: str = "jobscheduler",
        poll_timeout: float = 0.2,
        max_in_flight_per_subscription: int = 64,
        message_timeout: float = 10.0,
        group_protocol: Literal["consumer", "classic"] = "consumer",
        topic_prefix: str = "",
        rejoin_timeout: float = 20.0,
        unhealthy_after: float = 60.0,
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        if max_in_flight_per_subscription < 1:
            raise ValueError("max_in_flight_per_subscription must be >= 1")
        if poll_timeout <= 0 or message_timeout <= 0:
            raise ValueError("poll_timeout and message_timeout must be > 0")
        if rejoin_timeout <= 0 or unhealthy_after <= 0:
            raise ValueError("rejoin_timeout and unhealthy_after must be > 0")
        self._brokers = brokers
        self._partitions = partitions
        self._client_id = client_id
        self._message_timeout = message_timeout
        self._group_protocol = group_protocol
        self._prefix = topic_prefix
        self._consumer_options = ConsumerOptions(
            poll_timeout=poll_timeout,
            max_in_flight=max_in_flight_per_subscription,
            rejoin_timeout=rejoin_timeout,
            unhealthy_after=unhealthy_after,
        )
        self._dlq_topic = dlq_topic(topic_prefix)
        self._producer: Producer | None = None
        self._admin: AdminClient | None = None
        self._io_limiter = trio.CapacityLimiter(8)
        # One token per concurrently polling subscription; polls are short, so a process
        # with more subscriptions than tokens only polls each a little less often.
        self._poll_limiter = trio.CapacityLimiter(64)
        self._topics_known: set[str] = set()
        self._topics_lock = trio.Lock()
        self._subscriptions: set[KafkaSubscription] = set()
        self._started = False
        self._closed = False
        self._fatal: str | None = None
        #: Repeated producer errors become one line per interval (librdkafka's threads).
        self._throttled = LogThrottle(log)
        #: Publishes in progress; close() lets them finish before closing the producer.
        self._active_publishes = 0
        self._no_publishes = trio.Event()

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self._closed:
            raise BusError("bus is closed")
        if self._started:
            return
        admin_config: dict[str, str | int | float | bool] = {
            "bootstrap.servers": self._brokers,
            "client.id": self._client_id,
            "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
        }
        producer_config: dict[str, Any] = {
            **admin_config,
            "logger": rdkafka_log,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": int(self._message_timeout * 1000),
            "error_cb": self._on_producer_error,
        }

        def build() -> tuple[Producer, AdminClient]:
            return Producer(producer_config), AdminClient(admin_config, logger=rdkafka_log)

        try:
            self._producer, self._admin = await trio.to_thread.run_sync(
                build, limiter=self._io_limiter
            )
        except (KafkaException, ValueError, TypeError) as exc:
            raise bus_error("cannot create Kafka clients", exc) from exc
        self._started = True
        log.info("kafka bus started", extra={"brokers": self._brokers})

    async def close(self) -> None:
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        for subscription in list(self._subscriptions):
            subscription.stop()
        if self._producer is None:
            await trio.lowlevel.checkpoint()
            return
        with trio.CancelScope(shield=True):
            with trio.move_on_after(CLOSE_TIMEOUT) as waiting:
                while self._active_publishes:
                    self._no_publishes = trio.Event()
                    await self._no_publishes.wait()
            producer, self._producer, self._admin = self._producer, None, None
            if waiting.cancelled_caught:
                # A publish thread may still be polling it: leave it to the garbage collector.
                log.warning("kafka bus closed with publishes still running")
                return
            with trio.move_on_after(CLOSE_TIMEOUT):
                await trio.to_thread.run_sync(flush_and_close, producer, limiter=self._io_limiter)
        log.info("kafka bus closed", extra={"brokers": self._brokers})

    @asynccontextmanager
    async def _publishing(self) -> AsyncIterator[Producer]:
        self._require_open()
        producer = self._producer
        assert producer is not None
        self._active_publishes += 1
        try:
            yield producer
        finally:
            self._active_publishes -= 1
            if not self._active_publishes:
                self._no_publishes.set()

    def _on_producer_error(self, err: KafkaError) -> None:
        reason = f"{err.name()} ({err.str()})"
        if err.fatal():
            self._fatal = reason
            log.error("kafka producer fatal error", extra={"error": reason})
        elif err.code() == KafkaError._ALL_BROKERS_DOWN:
            self._throttled.log(
                logging.WARNING,
                "kafka producer: all brokers down",
                key="all brokers down",
                extra={"error": reason},
            )
        else:  # transient; librdkafka retries, and its own log line already says why
            log.debug("kafka producer error", extra={"error": reason})

    def _require_open(self) -> None:
        if self._closed:
            raise BusError("bus is closed")
        if not self._started:
            raise BusError("bus is not started")
        if self._fatal is not None:
            raise BusError(f"kafka producer failed fatally: {self._fatal}")

    # -- topics ----------------------------------------------------------------------------

    async def _ensure_topics(self, topics: Iterable[str]) -> None:
        missing = set(topics) - self._topics_known
        if not missing:
            return
        async with self._topics_lock:
            missing -= self._topics_known
            if missing:
                await self._create_topics(sorted(missing))

    async def _create_topics(self, topics: list[str]) -> None:
        admin = self._admin
        if admin is None:
            raise BusError("bus is closed")
        await create_topics(
            admin,
            topics,
            partitions=self._partitions,
            request_timeout=self._message_timeout,
            limiter=self._io_limiter,
        )
        self._topics_known.update(topics)

    # -- publishing ------------------------------------------------------------------------

    async def publish(self, messages: Sequence[WakeUp]) -> None:
        async with self._publishing() as producer:
            if not messages:
                await trio.lowlevel.checkpoint()
                return
            records = [
                (dispatch_topic(m.job_type, self._prefix), m.job_id.encode(), m.encode())
                for m in messages
            ]
            await self._ensure_topics({topic for topic, _, _ in records})
            await self._produce(producer, records)

    async def publish_dead_letter(self, letter: DeadLetter) -> None:
        async with self._publishing() as producer:
            topic = self._dlq_topic
            await self._ensure_topics([topic])
            await self._produce(producer, [(topic, letter.job_id.encode(), letter.encode())])
        log.info(
            "dead letter published",
            extra={"job_id": letter.job_id, "tenant": letter.tenant_id, "topic": topic},
        )

    async def _produce(self, producer: Producer, records: list[Record]) -> None:
        await produce(
            producer, records, message_timeout=self._message_timeout, limiter=self._io_limiter
        )

    # -- consuming -------------------------------------------------------------------------

    def _group_protocol_config(self) -> dict[str, str]:
        if self._group_protocol == "consumer":
            # KIP-848 (Kafka >= 4.0): the broker assigns incrementally, with no group-wide
            # JoinGroup barrier. Under the classic protocol a member leaving while a rebalance
            # is pending has its LeaveGroup stuck behind its blocked JoinGroup, and the group
            # stalls until the session times out (seen with executors restarting quickly).
            return {"group.protocol": "consumer"}
        return {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky"}

    @asynccontextmanager
    async def subscribe(self, job_type: str) -> AsyncIterator[Subscription]:
        self._require_open()
        topic = dispatch_topic(job_type, self._prefix)
        group = consumer_group(job_type, self._prefix)
        # The DLQ topic too: a consumer's process dead-letters jobs, and a reader of jobs.dlq
        # may subscribe as soon as a job's status says dlq -- before the (asynchronous)
        # announcement created the topic.
        await self._ensure_topics([topic, self._dlq_topic])
        config = {
            "bootstrap.servers": self._brokers,
            "client.id": f"{self._client_id}-{job_type}",
            "group.id": group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **self._group_protocol_config(),
            # Bounds how long a resumed partition waits behind an in-flight long-poll fetch.
            "fetch.wait.max.ms": 100,
            "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
            "logger": rdkafka_log,
        }
        subscription = KafkaSubscription(
            job_type=job_type,
            topic=topic,
            group=group,
            config=config,
            options=self._consumer_options,
            poll_limiter=self._poll_limiter,
        )
        await subscription.open()
        self._subscriptions.add(subscription)
        log.info("subscribed", extra={"job_type": job_type, "topic": topic})
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(subscription.run_poller)
                try:
                    yield subscription
                finally:
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group_error:
            # The poller never raises (its failures end the iterator with a BusError), so a
            # group here only wraps what the caller's own block raised: give that back as is.
            if len(group_error.exceptions) == 1:
                raise group_error.exceptions[0] from None
            raise
        finally:
            self._subscriptions.discard(subscription)
            await subscription.close_consumer()
