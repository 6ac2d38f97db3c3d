"""One Kafka subscription: a consumer polled from trio threads, its deliveries, and the
watchdog that replaces the consumer when it stops being a working group member.

The poller polls all the time, whether or not the iterator's consumer keeps up, so the
member is never evicted for exceeding ``max.poll.interval.ms``; it hands deliveries over a
bounded memory channel. With ``max_in_flight`` deliveries unsettled it pauses its
partitions and keeps serving the group (a zero-timeout poll at least every
``poll_timeout``); the first settle wakes it to resume. Commit bookkeeping is
:mod:`.offsets` (pure; touched only on the trio thread); librdkafka's rebalance, commit and
statistics callbacks, which run inside ``poll()`` on the worker thread, are :mod:`.group`;
what runs on that thread between two trio steps is :mod:`.polling`.

Membership (see ``membership``). The subscription records every sign that its consumer is
a group member -- an assignment, a successful commit, a statistics report showing its
heartbeats answered (all reported through :mod:`.group`); it never asks the cluster. Past
``rejoin_timeout`` without one -- or at once on a fatal error or a poll that raises -- the
consumer is closed and a fresh one joins the group. The partitions' state is dropped
first, so their unsettled deliveries are redelivered from the committed offsets.
``problem()`` reports a subscription that has not been a member for ``unhealthy_after``.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio
from confluent_kafka import Consumer, KafkaError, KafkaException, Message

from jobscheduler._scopes import shielded, take_ready
from jobscheduler.bus.base import Delivery, Subscription, WakeUp
from jobscheduler.errors import BusError
from jobscheduler.observability.logthrottle import LogThrottle

from ._common import CLOSE_TIMEOUT, bus_error
from .group import MEMBERSHIP_ERRORS, GroupEvents
from .membership import ConsumerOptions, MembershipWatch
from .offsets import TP, OffsetBook, PartitionState
from .polling import final_commit_and_close, poll_cycle

log = logging.getLogger(__name__)


@attrs.define(eq=False)
class KafkaDelivery(Delivery):
    _subscription: KafkaSubscription
    _partition: TP = attrs.field(alias="tp")
    _state: PartitionState
    _offset: int
    message: WakeUp
    _settled: bool = attrs.field(default=False, init=False)

    @property
    def stale(self) -> bool:
        """The partition was revoked since this was received; settling it is a no-op."""
        return not self._subscription._book.is_current(self._partition, self._state)

    def _settle(self, how: str) -> None:
        if not self._settled:
            self._settled = True
            self._subscription._settle(self._partition, self._state, self._offset, how)

    async def ack(self) -> None:
        self._settle("ack")
        await trio.lowlevel.checkpoint()

    async def release(self) -> None:
        self._settle("release")
        await trio.lowlevel.checkpoint()


class KafkaSubscription(Subscription):
    """The consumer of one job type plus the bookkeeping its poller and deliveries share."""

    def __init__(
        self,
        *,
        job_type: str,
        topic: str,
        group: str,
        config: dict[str, Any],
        options: ConsumerOptions,
        poll_limiter: trio.CapacityLimiter,
    ) -> None:
        self._job_type = job_type
        self._topic = topic
        self._group = group
        self._config = config
        self._options = options
        self._poll_limiter = poll_limiter
        self._consumer: Consumer | None = None
        self._book = OffsetBook(options.max_in_flight)
        self._send, self._receive = trio.open_memory_channel[KafkaDelivery](options.max_in_flight)
        #: Deliveries received beyond the channel's room (only possible when a partition was
        #: paused after librdkafka had already fetched for it); handed over in order.
        self._backlog: collections.deque[KafkaDelivery] = collections.deque()
        self._poller_scope = trio.CancelScope()
        self._failure: BusError | None = None
        #: Set by settles; the poller waits on it while paused at the in-flight limit.
        self._settle_event = trio.Event()
        #: How many times the consumer was replaced.
        self.recreations = 0
        self._throttled = LogThrottle(log)
        #: Rebalance, commit and statistics callbacks, and the membership evidence (trio
        #: time; the watch is set for real when the consumer is opened).
        self._group_events = GroupEvents(
            job_type=job_type,
            group=group,
            book=self._book,
            watch=MembershipWatch(options, 0.0),
            throttled=self._throttled,
        )

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
            # Its partition moved away; whoever owns it re-reads from the committed offset.
            log.debug(
                "delivery of a revoked partition dropped",
                extra={"topic": delivery._partition[0], "partition": delivery._partition[1]},
            )

    def receive_ready(self, limit: int) -> list[Delivery]:
        # Deliveries of revoked partitions are dropped, as in __anext__.
        return [d for d in take_ready(self._receive, limit) if not d.stale]

    def problem(self) -> str | None:
        absent = self._watch.absent_for(trio.current_time())
        if absent is not None:
            return (
                f"consumer of {self._topic} has not been a member of group {self._group} "
                f"for {absent:.0f}s"
            )
        return None

    # -- bookkeeping (trio thread only) --------------------------------------------------

    def _settle(self, tp: TP, state: PartitionState, offset: int, how: str) -> None:
        if not self._book.settle(tp, state, offset):
            log.debug(
                "settle of a revoked partition ignored",
                extra={"topic": tp[0], "partition": tp[1], "offset": offset, "settle": how},
            )
            return
        if how == "release":
            log.debug(
                "delivery released",
                extra={"topic": tp[0], "partition": tp[1], "offset": offset},
            )
        self._settle_event.set()

    def _accept(self, msg: Message) -> None:
        err = msg.error()
        if err is not None:
            reason = f"{err.name()}: {err.str()}"
            if err.fatal():
                self._watch.failed(f"fatal consumer error {reason}")
                return
            if err.code() in MEMBERSHIP_ERRORS:
                self._group_events.membership_doubt(reason)
                return
            if err.code() == KafkaError._PARTITION_EOF:
                log.debug("partition end reached", extra={"job_type": self._job_type})
                return
            self._throttled.log(
                logging.WARNING,
                "consumer error event",
                key=("error", err.code()),
                extra={"job_type": self._job_type, "error": reason},
            )
            return
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        assert topic is not None
        assert partition is not None
        assert offset is not None
        tp: TP = (topic, partition)
        state = self._book.receive(tp, offset)
        if state is None:
            log.debug(
                "message of an unassigned partition dropped",
                extra={"topic": topic, "partition": partition, "offset": offset},
            )
            return
        try:
            wake_up = WakeUp.decode(msg.value() or b"")
        except BusError as exc:
            log.warning(
                "malformed wake-up skipped",
                extra={"topic": topic, "partition": partition, "offset": offset, "error": str(exc)},
            )
            state.mark_done(offset)
            return
        delivery = KafkaDelivery(self, tp, state, offset, wake_up)
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

    # -- the consumer's life -------------------------------------------------------------

    @property
    def _watch(self) -> MembershipWatch:
        return self._group_events.watch

    async def _join(self) -> Consumer:
        """A new consumer of the current generation, subscribed to the topic."""
        return await trio.to_thread.run_sync(
            self._group_events.open_consumer,
            self._config,
            self._topic,
            self._group_events.generation,
            limiter=self._poll_limiter,
        )

    async def open(self) -> None:
        """Create the first consumer; raises BusError if it cannot be created."""
        try:
            self._consumer = await self._join()
        except (KafkaException, ValueError, TypeError, RuntimeError) as exc:
            raise bus_error(f"cannot subscribe to {self._topic}", exc) from exc
        self._group_events.watch = MembershipWatch(self._options, trio.current_time())

    async def _recreate(self, reason: str) -> None:
        """Replace the consumer: drop every partition's state (their unsettled deliveries
        go back to the group from the committed offsets), close the old consumer (bounded),
        and join with a new one. Raises BusError if no new consumer can be created."""
        self.recreations += 1
        held = self._book.lose_all()
        self._group_events.generation += 1
        old, self._consumer = self._consumer, None
        self._throttled.log(
            logging.WARNING,
            "consumer replaced",
            key="recreate",
            extra={
                "job_type": self._job_type,
                "group": self._group,
                "reason": reason,
                "partitions_dropped": len(held),
                "recreations": self.recreations,
            },
        )
        if old is not None:
            with trio.move_on_after(CLOSE_TIMEOUT):
                try:
                    # Abandonable: a consumer stuck leaving its group must not hold us up.
                    await trio.to_thread.run_sync(old.close, abandon_on_cancel=True)
                except (KafkaException, RuntimeError) as exc:  # e.g. already closed
                    log.debug("old consumer close failed", extra={"error": str(exc)})
        try:
            self._consumer = await self._join()
        except (KafkaException, ValueError, TypeError, RuntimeError) as exc:
            raise bus_error(f"cannot re-subscribe to {self._topic}", exc) from exc
        self._watch.replaced(trio.current_time())

    async def _watch_membership(self) -> None:
        """Replace the consumer if it has been failing, or out of its group, for too long."""
        if self._watch.replace_reason is not None:
            # A fault that recurs at once is not retried in a tight loop.
            await trio.sleep_until(self._watch.earliest_replacement())
        reason = self._watch.replace_due(trio.current_time())
        if reason is not None:
            await self._recreate(reason)

    # -- the poller ------------------------------------------------------------------------

    async def run_poller(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Poll until cancelled or stopped; always ends the iterator when it returns."""
        options = self._options
        try:
            with self._poller_scope:
                task_status.started()
                while True:
                    await self._watch_membership()
                    commits = self._book.due_commits()
                    pause, resume = self._book.flow_control()
                    room = self._book.room()
                    # Paused, a poll only serves the group (and returns at once).
                    timeout = options.poll_timeout if room > 0 else 0.0
                    try:
                        messages = await trio.to_thread.run_sync(
                            poll_cycle, self._consumer, self._group_events,
                            commits, pause, resume, max(room, 1), timeout,
                            limiter=self._poll_limiter,
                        )  # fmt: skip
                    except (KafkaException, RuntimeError) as exc:
                        self._watch.failed(str(bus_error("poll failed", exc)))
                        continue
                    for msg in messages:
                        self._accept(msg)
                    self._hand_over_backlog()
                    if self._book.room() <= 0:
                        # At the limit: nothing to fetch until a settle frees room. Wake on
                        # the first one (to commit and resume at once), or after
                        # poll_timeout to keep serving the group.
                        self._settle_event = trio.Event()
                        with trio.move_on_after(options.poll_timeout):
                            await self._settle_event.wait()
        except BusError as exc:
            self._failure = exc
            log.error("subscription failed", extra={"job_type": self._job_type, "error": str(exc)})
        finally:
            self._send.close()

    def stop(self) -> None:
        """Stop polling; the iterator ends once buffered deliveries are consumed."""
        self._poller_scope.cancel()

    async def close_consumer(self) -> None:
        """Commit contiguous settles and leave the group; bounded, survives cancellation."""
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            await trio.lowlevel.checkpoint()
            return
        with shielded(CLOSE_TIMEOUT) as scope:
            try:
                # Abandonable only so a dead broker cannot hold shutdown past the deadline.
                await trio.to_thread.run_sync(
                    final_commit_and_close,
                    consumer,
                    self._group_events,
                    self._book,
                    self._job_type,
                    limiter=self._poll_limiter,
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
