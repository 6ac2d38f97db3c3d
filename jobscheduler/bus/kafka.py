"""The production bus: Kafka through confluent-kafka (librdkafka), driven from trio threads.

Topics: ``jobs.dispatch.<jobType>`` (key = jobId, value = ``WakeUp.encode()``) and
``jobs.dlq`` (key = jobId), created on first use (``partitions``, replication 1). Consumers of
a type share the group ``executor-<jobType>``.

Threading. confluent-kafka is blocking, so every call into it runs through
``trio.to_thread.run_sync`` with one of the bus's own limiters: ``_io_limiter`` for the
producer and the AdminClient, ``_poll_limiter`` for consumers (so a subscription's poll loop
never starves publishing or trio's default pool). Each call is short (polls last at most
``poll_timeout``; long waits are loops of short hops), so cancellation is prompt. This module
starts no thread of its own; each consumer is only ever called by one hop at a time.

Publishing. A batch is produced in one hop and its delivery reports are awaited in hops of
at most 0.25 s; ``publish`` returns when the broker acknowledged every message (``acks=all``,
idempotent producer) and raises BusError if any failed or timed out (``message_timeout``).

Consuming. ``subscribe()`` opens a nursery holding one poller task. The poller polls all the
time, whether or not the iterator's consumer keeps up, so the member is never evicted for
exceeding ``max.poll.interval.ms``; it hands deliveries over a bounded memory channel. With
``max_in_flight_per_subscription`` deliveries un-acked it pauses its partitions and keeps
serving the group (a zero-timeout poll at least every ``poll_timeout``); the first ack wakes
it to resume. Pausing drops librdkafka's prefetched messages, so a resumed partition seeks
to the offset after the last message received: fetching restarts at once, nothing skipped.

Commit tracking (per assigned partition; bookkeeping touched only on the trio thread):
``outstanding`` holds the offsets handed out, in offset order; ``done`` those acked. When
the oldest outstanding offset is done, it and every done offset after it are popped and
``position`` becomes the last popped offset + 1 — the highest *contiguous* acked offset + 1.
The poller commits a position (asynchronously) when it moved, so an un-acked message is
never committed past and is redelivered to whoever owns the partition next. Rebalance
callbacks run inside ``poll()`` on the worker thread and hop back to the trio thread
(``trio.from_thread.run_sync``) for the bookkeeping: on revoke the contiguous positions are
committed synchronously and the partitions' state is dropped, so late acks of their
deliveries are no-ops and their still-buffered deliveries are skipped; on loss the state is
dropped without a commit. A malformed message counts as acked at once. Leaving the
``async with`` stops the poller, commits the contiguous positions and closes the consumer
(bounded, shielded from cancellation).

Group protocol. ``group_protocol="consumer"`` (KIP-848, Kafka >= 4.0) is the default; see
``KafkaBus._group_protocol_config`` for why. ``"classic"`` uses cooperative-sticky.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import trio
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

# ``confluent_kafka.admin.NewTopic`` is this class re-exported; its stub lacks the export.
from confluent_kafka.cimpl import NewTopic

from .._scopes import shielded, take_ready
from ..errors import BusError
from .base import (
    Bus,
    DeadLetter,
    Delivery,
    Subscription,
    WakeUp,
    consumer_group,
    dispatch_topic,
    dlq_topic,
)

log = logging.getLogger(__name__)
#: librdkafka's own log lines (connection failures, ...) are routed here.
_rdkafka_log = logging.getLogger(__name__ + ".librdkafka")

#: Longest single blocking hop while waiting for deliveries, flushes or admin futures.
_HOP = 0.25
#: Extra time granted past ``message.timeout.ms`` before a publish gives up on its
#: delivery reports (librdkafka reports every message by then, success or failure).
_DELIVERY_GRACE = 5.0
#: Bound on flushing the producer at close and on committing + closing a consumer.
_CLOSE_TIMEOUT = 10.0

_TP = tuple[str, int]


def _bus_error(what: str, exc: BaseException) -> BusError:
    """Translate a confluent-kafka failure into the project's error, at the edge."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err: KafkaError = exc.args[0]
        return BusError(f"{what}: {err.name()} ({err.str()})")
    return BusError(f"{what}: {exc}")


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


class _PartitionState:
    """Commit bookkeeping of one assigned partition (one assignment generation)."""

    __slots__ = ("committed", "done", "next_offset", "outstanding", "position")

    def __init__(self) -> None:
        #: The offset after the last message received, or -1 (where a resume seeks to).
        self.next_offset = -1
        self.outstanding: collections.deque[int] = collections.deque()
        self.done: set[int] = set()
        #: Highest contiguous acked offset + 1, or -1 before anything was acked.
        self.position = -1
        #: The position last sent in a commit, or -1.
        self.committed = -1

    def unacked(self) -> int:
        return len(self.outstanding) - len(self.done)

    def mark_done(self, offset: int) -> bool:
        """Record an ack; return True if the contiguous position moved."""
        self.done.add(offset)
        moved = False
        while self.outstanding and self.outstanding[0] in self.done:
            head = self.outstanding.popleft()
            self.done.discard(head)
            self.position = head + 1
            moved = True
        return moved


class _KafkaDelivery(Delivery):
    __slots__ = ("_acked", "_offset", "_partition", "_state", "_subscription", "message")

    def __init__(
        self,
        subscription: _KafkaSubscription,
        tp: _TP,
        state: _PartitionState,
        offset: int,
        message: WakeUp,
    ) -> None:
        self.message = message
        self._subscription = subscription
        self._partition = tp
        self._state = state
        self._offset = offset
        self._acked = False

    @property
    def stale(self) -> bool:
        """The partition was revoked since this was received; its ack would be a no-op."""
        return self._subscription._parts.get(self._partition) is not self._state

    async def ack(self) -> None:
        if not self._acked:
            self._acked = True
            self._subscription._ack(self._partition, self._state, self._offset)
        await trio.lowlevel.checkpoint()


class _KafkaSubscription(Subscription):
    """The consumer of one job type plus the bookkeeping its poller and acks share."""

    def __init__(self, bus: KafkaBus, job_type: str) -> None:
        self._bus = bus
        self._job_type = job_type
        self._topic = dispatch_topic(job_type, bus._prefix)
        self._consumer: Consumer | None = None
        self._max_in_flight = bus._max_in_flight
        self._send, self._receive = trio.open_memory_channel[_KafkaDelivery](self._max_in_flight)
        #: Deliveries received beyond the channel's room (only possible when a partition was
        #: paused after librdkafka had already fetched for it); handed over in order.
        self._backlog: collections.deque[_KafkaDelivery] = collections.deque()
        self._parts: dict[_TP, _PartitionState] = {}
        self._paused: set[_TP] = set()
        self._resume_on_room: set[_TP] = set()
        self._poller_scope = trio.CancelScope()
        self._failure: BusError | None = None
        #: Set by acks; the poller waits on it while paused at the in-flight limit.
        self._ack_event = trio.Event()

    # -- the iterator side ---------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self

    async def __anext__(self) -> Delivery:
        while True:
            try:
                delivery = await self._receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                if self._failure is not None:
                    raise self._failure from None
                raise StopAsyncIteration from None
            if not delivery.stale:
                return delivery
            # Its partition moved to another member, which re-reads from the committed offset.
            log.debug(
                "delivery of a revoked partition dropped",
                extra={"topic": delivery._partition[0], "partition": delivery._partition[1]},
            )

    def receive_ready(self, limit: int) -> list[Delivery]:
        # Deliveries of revoked partitions are dropped, as in __anext__.
        return [d for d in take_ready(self._receive, limit) if not d.stale]

    # -- bookkeeping (trio thread only) --------------------------------------------------

    def _unacked(self) -> int:
        return sum(state.unacked() for state in self._parts.values())

    def _ack(self, tp: _TP, state: _PartitionState, offset: int) -> None:
        if self._parts.get(tp) is not state:
            log.debug(
                "ack of a revoked partition ignored",
                extra={"topic": tp[0], "partition": tp[1], "offset": offset},
            )
            return
        state.mark_done(offset)
        self._ack_event.set()

    def _due_commits(self) -> list[TopicPartition]:
        """Positions that moved since the last cycle; marks them committed.

        The mark is optimistic (a failed async commit resets it, see ``_commit_failed``;
        a cycle cancelled before its hop ran is covered by the final commit, which, like
        the commit on revoke, re-sends every known position regardless of the mark).
        """
        offsets = []
        for (topic, partition), state in self._parts.items():
            if state.position > state.committed:
                offsets.append(TopicPartition(topic, partition, state.position))
                state.committed = state.position
        return offsets

    def _all_positions(self) -> list[TopicPartition]:
        return [
            TopicPartition(topic, partition, state.position)
            for (topic, partition), state in self._parts.items()
            if state.position >= 0
        ]

    def _flow_control(self) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Partitions to pause / resume so at most ``max_in_flight`` deliveries are un-acked.

        A resumed partition carries the offset after its last received message: pausing
        drops librdkafka's prefetched messages, and seeking there on resume makes it fetch
        again at once instead of at its fetcher's next idle wake-up (up to ~1 s later).
        """
        if self._unacked() >= self._max_in_flight:
            to_pause = [tp for tp in self._parts if tp not in self._paused]
            self._paused.update(to_pause)
            if to_pause:
                log.debug(
                    "in-flight limit reached, partitions paused",
                    extra={"job_type": self._job_type, "in_flight": self._unacked()},
                )
            return [TopicPartition(t, p) for t, p in to_pause], []
        to_resume = (self._paused | self._resume_on_room) & self._parts.keys()
        self._paused.clear()
        self._resume_on_room.clear()
        return [], [TopicPartition(t, p, self._parts[t, p].next_offset) for t, p in to_resume]

    def _accept(self, msg: Message) -> None:
        err = msg.error()
        if err is not None:
            if err.fatal():
                raise BusError(f"consumer failed: {err.name()} ({err.str()})")
            level = logging.DEBUG if err.code() == KafkaError._PARTITION_EOF else logging.WARNING
            log.log(
                level,
                "consumer error event",
                extra={"job_type": self._job_type, "error": f"{err.name()}: {err.str()}"},
            )
            return
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        assert topic is not None
        assert partition is not None
        assert offset is not None
        tp: _TP = (topic, partition)
        state = self._parts.get(tp)
        if state is None:
            log.debug(
                "message of an unassigned partition dropped",
                extra={"topic": tp[0], "partition": tp[1], "offset": offset},
            )
            return
        state.outstanding.append(offset)
        state.next_offset = offset + 1
        try:
            wake_up = WakeUp.decode(msg.value() or b"")
        except BusError as exc:
            log.warning(
                "malformed wake-up skipped",
                extra={"topic": tp[0], "partition": tp[1], "offset": offset, "error": str(exc)},
            )
            state.mark_done(offset)
            return
        delivery = _KafkaDelivery(self, tp, state, offset, wake_up)
        if self._backlog:
            self._backlog.append(delivery)
            return
        try:
            self._send.send_nowait(delivery)
        except trio.WouldBlock:
            self._backlog.append(delivery)

    def _hand_over_backlog(self) -> None:
        while self._backlog:
            try:
                self._send.send_nowait(self._backlog[0])
            except trio.WouldBlock:
                return
            self._backlog.popleft()

    def _assigned(self, partitions: Sequence[TopicPartition]) -> None:
        for p in partitions:
            tp = (p.topic, p.partition)
            self._parts[tp] = _PartitionState()
            # librdkafka may carry a pause over from an earlier assignment of this partition.
            self._resume_on_room.add(tp)
        log.log(
            logging.INFO if partitions else logging.DEBUG,
            "partitions assigned",
            extra={
                "job_type": self._job_type,
                "partitions": sorted(p.partition for p in partitions),
            },
        )

    def _revoked(self, partitions: Sequence[TopicPartition], *, lost: bool) -> list[TopicPartition]:
        """Drop the partitions' state; return the contiguous positions to commit first."""
        offsets = []
        for p in partitions:
            tp = (p.topic, p.partition)
            self._paused.discard(tp)
            self._resume_on_room.discard(tp)
            state = self._parts.pop(tp, None)
            if state is not None and not lost and state.position >= 0:
                offsets.append(TopicPartition(p.topic, p.partition, state.position))
        log.log(
            logging.WARNING if lost else logging.INFO,
            "partitions lost" if lost else "partitions revoked",
            extra={
                "job_type": self._job_type,
                "partitions": sorted(p.partition for p in partitions),
            },
        )
        return offsets

    def _retry_commit(self, partitions: Sequence[TopicPartition]) -> None:
        """Make the next cycle commit these partitions' positions again."""
        for p in partitions:
            state = self._parts.get((p.topic, p.partition))
            if state is not None:
                state.committed = -1

    # -- librdkafka callbacks (worker thread, inside poll/close) -------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._call_trio(self._assigned, partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        offsets = self._call_trio(lambda: self._revoked(partitions, lost=False))
        if offsets:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                log.warning(
                    "commit on revoke failed",
                    extra={"job_type": self._job_type, "error": str(_bus_error("commit", exc))},
                )

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._call_trio(lambda: self._revoked(partitions, lost=True))

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        failed = [p for p in partitions if p.error is not None]
        if err is None and not failed:
            return
        if err is not None and err.code() == KafkaError._NO_OFFSET:
            return
        reason = f"{err.name()} ({err.str()})" if err is not None else str(failed[0].error)
        log.warning("offset commit failed", extra={"job_type": self._job_type, "error": reason})
        self._call_trio(self._retry_commit, failed or partitions)

    def _call_trio(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run bookkeeping on the trio thread; the poll hop waits for it (microseconds)."""
        try:
            return trio.from_thread.run_sync(fn, *args)
        except trio.RunFinishedError:
            return None
        except Exception:
            # An exception escaping a callback would surface from poll() in the wrong place.
            log.exception("rebalance bookkeeping failed", extra={"job_type": self._job_type})
            return None

    # -- the poller ------------------------------------------------------------------------

    def _cycle(
        self,
        commits: list[TopicPartition],
        pause: list[TopicPartition],
        resume: list[TopicPartition],
        max_messages: int,
        timeout: float,
    ) -> list[Message]:
        """One blocking hop: commit, apply flow control, poll up to ``max_messages``."""
        consumer = self._consumer
        assert consumer is not None
        if commits:
            try:
                consumer.commit(offsets=commits, asynchronous=True)
            except KafkaException as exc:  # e.g. no longer a group member: retry next cycle
                log.warning(
                    "offset commit failed",
                    extra={"job_type": self._job_type, "error": str(_bus_error("commit", exc))},
                )
                self._call_trio(self._retry_commit, commits)
        try:
            if pause:
                consumer.pause(pause)
            if resume:
                consumer.resume([TopicPartition(tp.topic, tp.partition) for tp in resume])
                for tp in resume:
                    if tp.offset >= 0:
                        consumer.seek(tp)  # one seek failing leaves a plain (slower) resume
        except KafkaException as exc:  # e.g. a partition revoked in between: harmless
            log.debug("pause/resume failed", extra={"error": str(exc)})
        first = consumer.poll(timeout)
        if first is None:
            return []
        if max_messages <= 1:
            return [first]
        return [first, *consumer.consume(num_messages=max_messages - 1, timeout=0)]

    async def run_poller(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Poll until cancelled or stopped; always ends the iterator when it returns."""
        try:
            with self._poller_scope:
                task_status.started()
                while True:
                    commits = self._due_commits()
                    pause, resume = self._flow_control()
                    room = self._max_in_flight - self._unacked()
                    # Paused, a poll only serves the group (and returns at once).
                    timeout = self._bus._poll_timeout if room > 0 else 0.0
                    messages = await trio.to_thread.run_sync(
                        self._cycle, commits, pause, resume, max(room, 1), timeout,
                        limiter=self._bus._poll_limiter,
                    )  # fmt: skip
                    for msg in messages:
                        self._accept(msg)
                    self._hand_over_backlog()
                    if self._unacked() >= self._max_in_flight:
                        # At the limit: nothing to fetch until an ack frees room. Wake on the
                        # first ack (to commit and resume at once), or after poll_timeout to
                        # keep serving the group.
                        self._ack_event = trio.Event()
                        with trio.move_on_after(self._bus._poll_timeout):
                            await self._ack_event.wait()
        except (KafkaException, RuntimeError) as exc:
            self._failure = _bus_error(f"consuming {self._topic} failed", exc)
            log.error("subscription failed", extra={"job_type": self._job_type, "error": str(exc)})
        except BusError as exc:
            self._failure = exc
            log.error("subscription failed", extra={"job_type": self._job_type, "error": str(exc)})
        finally:
            self._send.close()

    def stop(self) -> None:
        """Stop polling; the iterator ends once buffered deliveries are consumed."""
        self._poller_scope.cancel()

    def _final_commit_and_close(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        offsets = self._call_trio(self._all_positions)
        try:
            if offsets:
                consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            log.warning(
                "final commit failed",
                extra={"job_type": self._job_type, "error": str(_bus_error("commit", exc))},
            )
        finally:
            consumer.close()

    async def close_consumer(self) -> None:
        """Commit contiguous acks and leave the group; bounded, survives cancellation."""
        with shielded(_CLOSE_TIMEOUT) as scope:
            try:
                # Abandonable only so a dead broker cannot hold shutdown past the deadline.
                await trio.to_thread.run_sync(
                    self._final_commit_and_close,
                    limiter=self._bus._poll_limiter,
                    abandon_on_cancel=True,
                )
            except (KafkaException, RuntimeError) as exc:
                log.warning(
                    "consumer close failed", extra={"job_type": self._job_type, "error": str(exc)}
                )
        if scope.cancelled_caught:
            log.warning("consumer close timed out", extra={"job_type": self._job_type})
        else:
            log.debug("subscription closed", extra={"job_type": self._job_type})


class KafkaBus(Bus):
    """The Bus port on Kafka. See the module docstring for the threading/commit design.

    ``brokers`` is librdkafka's ``bootstrap.servers``; ``partitions`` applies to topics this
    bus creates; ``poll_timeout`` bounds each consumer poll (and so how late a stop is
    noticed); ``max_in_flight_per_subscription`` caps un-acked deliveries per subscription
    (also its channel size); ``message_timeout`` bounds each publish (``message.timeout.ms``,
    topic creation); ``group_protocol`` picks the consumer-group protocol; ``topic_prefix``
    is put before every topic and consumer-group name (see ``bus.base``).
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
    ) -> None:
        if partitions < 1:
            raise ValueError("partitions must be >= 1")
        if max_in_flight_per_subscription < 1:
            raise ValueError("max_in_flight_per_subscription must be >= 1")
        if poll_timeout <= 0 or message_timeout <= 0:
            raise ValueError("poll_timeout and message_timeout must be > 0")
        self._brokers = brokers
        self._partitions = partitions
        self._client_id = client_id
        self._poll_timeout = poll_timeout
        self._max_in_flight = max_in_flight_per_subscription
        self._message_timeout = message_timeout
        self._group_protocol = group_protocol
        self._prefix = topic_prefix
        self._dlq_topic = dlq_topic(topic_prefix)
        self._producer: Producer | None = None
        self._admin: AdminClient | None = None
        self._io_limiter = trio.CapacityLimiter(8)
        # One token per concurrently polling subscription; polls are short, so a process
        # with more subscriptions than tokens only polls each a little less often.
        self._poll_limiter = trio.CapacityLimiter(64)
        self._topics_known: set[str] = set()
        self._topics_lock = trio.Lock()
        self._subscriptions: set[_KafkaSubscription] = set()
        self._started = False
        self._closed = False
        self._fatal: str | None = None
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
        }
        producer_config: dict[str, Any] = {
            **admin_config,
            "logger": _rdkafka_log,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": int(self._message_timeout * 1000),
            "error_cb": self._on_producer_error,
        }

        def build() -> tuple[Producer, AdminClient]:
            return Producer(producer_config), AdminClient(admin_config, logger=_rdkafka_log)

        try:
            self._producer, self._admin = await trio.to_thread.run_sync(
                build, limiter=self._io_limiter
            )
        except (KafkaException, ValueError, TypeError) as exc:
            raise _bus_error("cannot create Kafka clients", exc) from exc
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
            with trio.move_on_after(_CLOSE_TIMEOUT) as waiting:
                while self._active_publishes:
                    self._no_publishes = trio.Event()
                    await self._no_publishes.wait()
            producer, self._producer, self._admin = self._producer, None, None
            if waiting.cancelled_caught:
                # A publish thread may still be polling it: leave it to the garbage collector.
                log.warning("kafka bus closed with publishes still running")
                return
            with trio.move_on_after(_CLOSE_TIMEOUT):
                await trio.to_thread.run_sync(
                    self._flush_and_close, producer, limiter=self._io_limiter
                )
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

    @staticmethod
    def _flush_and_close(producer: Producer) -> None:
        # Bounded well below _CLOSE_TIMEOUT; then drop what is left so close() cannot hang.
        remaining = producer.flush(min(5.0, _CLOSE_TIMEOUT / 2))
        if remaining:
            log.warning("messages dropped at close", extra={"count": remaining})
            producer.purge()
            producer.poll(0)
        producer.close()

    def _on_producer_error(self, err: KafkaError) -> None:
        reason = f"{err.name()} ({err.str()})"
        if err.fatal():
            self._fatal = reason
            log.error("kafka producer fatal error", extra={"error": reason})
        elif err.code() == KafkaError._ALL_BROKERS_DOWN:
            log.warning("kafka producer: all brokers down", extra={"error": reason})
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
        new = [NewTopic(t, num_partitions=self._partitions, replication_factor=1) for t in topics]
        try:
            futures: dict[str, concurrent.futures.Future[None]] = admin.create_topics(
                new,
                request_timeout=self._message_timeout,
                operation_timeout=self._message_timeout,
            )
        except KafkaException as exc:
            raise _bus_error("cannot create topics", exc) from exc
        pending: set[concurrent.futures.Future[None]] = set(futures.values())
        with trio.move_on_after(self._message_timeout + _DELIVERY_GRACE):
            while pending:
                _, pending = await trio.to_thread.run_sync(
                    functools.partial(concurrent.futures.wait, pending, timeout=_HOP),
                    limiter=self._io_limiter,
                )
        if pending:
            raise BusError(f"timed out creating topics {topics}")
        created = []
        for topic, future in futures.items():
            error = future.exception()
            if error is None:
                created.append(topic)
                log.info("topic created", extra={"topic": topic, "partitions": self._partitions})
            elif (
                isinstance(error, KafkaException)
                and error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
            ):
                log.debug("topic exists", extra={"topic": topic})
            else:
                raise _bus_error(f"cannot create topic {topic}", error)
        if created:
            await self._await_metadata(admin, created)
        self._topics_known.update(topics)

    async def _await_metadata(self, admin: AdminClient, topics: list[str]) -> None:
        """Wait (bounded) until new topics have leaders in the cluster's metadata.

        A group member that subscribes before the coordinator has seen the topic gets an
        empty assignment and learns better only on its next heartbeat (5 s by default).
        Waiting for the metadata makes that rare (it remains possible: the coordinator's
        view is updated asynchronously); it only concerns a job type's first subscription.
        """

        def ready() -> bool:
            metadata = admin.list_topics(timeout=_HOP)
            for topic in topics:
                found = metadata.topics.get(topic)
                if found is None or found.error is not None or not found.partitions:
                    return False
                if any(p.leader < 0 for p in found.partitions.values()):
                    return False
            return True

        with trio.move_on_after(self._message_timeout):
            while True:
                try:
                    if await trio.to_thread.run_sync(ready, limiter=self._io_limiter):
                        return
                except KafkaException as exc:
                    log.debug("metadata not available yet", extra={"error": str(exc)})
                await trio.sleep(0.05)
        log.warning("new topics not visible in metadata yet", extra={"topics": topics})

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

    async def _produce(self, producer: Producer, records: list[tuple[str, bytes, bytes]]) -> None:
        """Produce every record, then wait (in short hops) for all delivery reports."""
        reports = _DeliveryReports(len(records))

        def produce_all() -> None:
            for topic, key, value in records:
                while True:
                    try:
                        producer.produce(
                            topic, value=value, key=key, on_delivery=reports.on_delivery
                        )
                        break
                    except BufferError:  # local queue full: serve reports to drain it
                        producer.poll(0.05)
            wait_reports()

        def wait_reports() -> None:
            until = time.monotonic() + _HOP
            while reports.remaining > 0 and time.monotonic() < until:
                producer.poll(0.05)

        with trio.move_on_after(self._message_timeout + _DELIVERY_GRACE):
            try:
                await trio.to_thread.run_sync(produce_all, limiter=self._io_limiter)
                while reports.remaining > 0:
                    await trio.to_thread.run_sync(wait_reports, limiter=self._io_limiter)
            except KafkaException as exc:
                raise _bus_error("publish failed", exc) from exc
        if reports.failures:
            raise BusError(
                f"{len(reports.failures)} of {len(records)} messages not delivered; "
                f"first: {reports.failures[0]}"
            )
        if reports.remaining > 0:
            raise BusError(f"{reports.remaining} of {len(records)} messages not confirmed in time")

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
        subscription = _KafkaSubscription(self, job_type)
        topic = subscription._topic
        await self._ensure_topics([topic])
        config = {
            "bootstrap.servers": self._brokers,
            "client.id": f"{self._client_id}-{job_type}",
            "group.id": consumer_group(job_type, self._prefix),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **self._group_protocol_config(),
            # Bounds how long a resumed partition waits behind an in-flight long-poll fetch.
            "fetch.wait.max.ms": 100,
            "logger": _rdkafka_log,
        }

        def open_consumer() -> Consumer:
            consumer = Consumer({**config, "on_commit": subscription._on_commit})
            try:
                consumer.subscribe(
                    [topic],
                    on_assign=subscription._on_assign,
                    on_revoke=subscription._on_revoke,
                    on_lost=subscription._on_lost,
                )
            except BaseException:
                consumer.close()
                raise
            return consumer

        try:
            subscription._consumer = await trio.to_thread.run_sync(
                open_consumer, limiter=self._poll_limiter
            )
        except (KafkaException, ValueError, TypeError, RuntimeError) as exc:
            raise _bus_error(f"cannot subscribe to {topic}", exc) from exc
        self._subscriptions.add(subscription)
        log.info("subscribed", extra={"job_type": job_type, "topic": topic})
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(subscription.run_poller)
                try:
                    yield subscription
                finally:
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The poller never raises (its failures end the iterator with a BusError), so a
            # group here only wraps what the caller's own block raised: give that back as is.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            self._subscriptions.discard(subscription)
            await subscription.close_consumer()


def delete_prefixed_topics(brokers: str, prefix: str, timeout: float = 15.0) -> list[str]:
    """Delete every topic whose name starts with ``prefix`` (one deployment's or test run's
    topics); returns their names. Blocking. An empty prefix is refused: it names every topic."""
    if not prefix:
        raise ValueError("refusing to delete topics without a prefix")
    admin = AdminClient({"bootstrap.servers": brokers})
    try:
        listed = admin.list_topics(timeout=timeout).topics
        ours = sorted(t for t in listed if t.startswith(prefix))
        if ours:
            for future in admin.delete_topics(ours, operation_timeout=timeout).values():
                future.result(timeout=timeout)
    except KafkaException as exc:
        raise _bus_error(f"cannot delete topics starting with {prefix!r}", exc) from exc
    return ours


__all__ = ["KafkaBus", "delete_prefixed_topics"]
