"""A subscription's consumer in its group: what librdkafka's callbacks report, applied on
the trio thread.

librdkafka calls back from inside ``poll()``/``close()`` on the worker thread: partitions
assigned, revoked or lost, offsets committed (or not), statistics. Each callback hops to
the trio thread (``trio.from_thread.run_sync``) for the bookkeeping: the offset book
(:mod:`.offsets`) and the membership evidence (:mod:`.membership`). On revoke, the
contiguous positions are committed synchronously before the partitions go; on loss their
state is dropped without a commit.

Each consumer instance has a *generation*; callbacks of an older (replaced) consumer are
ignored, so a late report from a consumer being closed cannot touch the new one's state.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from jobscheduler.observability.logthrottle import LogThrottle

from ._common import bus_error
from .membership import STATS_INTERVAL_MS, GroupStats, MembershipWatch, parse_stats
from .offsets import TPO, OffsetBook

# The subscription's logger, as before this module was split out of ``consumer``.
log = logging.getLogger("jobscheduler.bus.kafka.consumer")

#: Errors that mean this consumer is no longer (or not yet again) a member of its group.
MEMBERSHIP_ERRORS = frozenset(
    code
    for code in (
        getattr(KafkaError, name, None)
        for name in (
            "UNKNOWN_MEMBER_ID",
            "ILLEGAL_GENERATION",
            "FENCED_INSTANCE_ID",
            "FENCED_MEMBER_EPOCH",
            "STALE_MEMBER_EPOCH",
            "UNRELEASED_INSTANCE_ID",
        )
    )
    if code is not None
)


def to_tps(offsets: Sequence[TPO]) -> list[TopicPartition]:
    """confluent-kafka's form of ``(topic, partition, offset)`` triples."""
    return [TopicPartition(topic, partition, offset) for topic, partition, offset in offsets]


@attrs.define(kw_only=True, eq=False)
class GroupEvents:
    """The group side of one subscription: opens its consumers with librdkafka's callbacks
    and applies what they report to the offset book and the membership watch."""

    _job_type: str
    _group: str
    _book: OffsetBook
    #: Membership evidence (trio time); the subscription replaces it when it opens.
    watch: MembershipWatch
    _throttled: LogThrottle
    #: Which consumer instance callbacks belong to; older ones are ignored.
    generation: int = attrs.field(default=0, init=False)

    def open_consumer(self, config: dict[str, Any], topic: str, generation: int) -> Consumer:
        """Create and subscribe a consumer of ``generation`` (blocking; a worker thread)."""
        consumer = Consumer(
            {
                **config,
                "on_commit": functools.partial(self._on_commit, generation),
                "statistics.interval.ms": STATS_INTERVAL_MS,
                "stats_cb": functools.partial(self._on_stats, generation),
            }
        )
        try:
            consumer.subscribe(
                [topic],
                on_assign=functools.partial(self._on_assign, generation),
                on_revoke=functools.partial(self._on_revoke, generation),
                on_lost=functools.partial(self._on_lost, generation),
            )
        except BaseException:
            consumer.close()
            raise
        return consumer

    # -- bookkeeping (trio thread only) --------------------------------------------------

    def saw_member(self) -> None:
        self.watch.saw_member(trio.current_time())

    def membership_doubt(self, reason: str) -> None:
        """An error says we may have left the group. librdkafka rejoins by itself; if it
        does not, the lack of evidence has the consumer replaced after ``rejoin_timeout``."""
        self._throttled.log(
            logging.WARNING,
            "consumer group membership in doubt",
            key=("membership", reason),
            extra={"job_type": self._job_type, "group": self._group, "error": reason},
        )

    def _assigned(self, generation: int, partitions: Sequence[TopicPartition]) -> None:
        if generation != self.generation:
            return
        self.saw_member()
        self._book.assign((p.topic, p.partition) for p in partitions)
        log.log(
            logging.INFO if partitions else logging.DEBUG,
            "partitions assigned",
            extra={
                "job_type": self._job_type,
                "partitions": sorted(p.partition for p in partitions),
            },
        )

    def _revoked(
        self, generation: int, partitions: Sequence[TopicPartition], *, lost: bool
    ) -> list[TPO]:
        if generation != self.generation:
            return []
        offsets = self._book.revoke(((p.topic, p.partition) for p in partitions), lost=lost)
        if lost:
            self.membership_doubt("partitions lost")
        log.log(
            logging.WARNING if lost else logging.INFO,
            "partitions lost" if lost else "partitions revoked",
            extra={
                "job_type": self._job_type,
                "partitions": sorted(p.partition for p in partitions),
            },
        )
        return offsets

    def committed(
        self, generation: int, failed: Sequence[TopicPartition], reason: str | None, code: int
    ) -> None:
        """A commit of ``generation``'s consumer succeeded (``reason`` None) or failed."""
        if generation != self.generation:
            return
        if reason is None:
            self.saw_member()
            return
        if code in MEMBERSHIP_ERRORS:
            self.membership_doubt(reason)
        self._throttled.log(
            logging.WARNING,
            "offset commit failed",
            key=("commit", code),
            extra={"job_type": self._job_type, "error": reason},
        )
        self._book.commit_failed((p.topic, p.partition) for p in failed)

    def _stats(self, generation: int, stats: GroupStats) -> None:
        if generation != self.generation:
            return
        previous = self.watch.last_stats
        self.watch.saw_stats(stats, trio.current_time())
        if previous is None or (previous.state, previous.join_state) != (
            stats.state,
            stats.join_state,
        ):
            log.debug(
                "consumer group state",
                extra={
                    "job_type": self._job_type,
                    "group": self._group,
                    "state": stats.state,
                    "join_state": stats.join_state,
                    "assignment_size": stats.assignment_size,
                },
            )

    # -- librdkafka callbacks (worker thread, inside poll/close) -------------------------

    def _on_stats(self, generation: int, raw: str) -> None:
        stats = parse_stats(raw)
        if stats is not None:
            self.call_trio(self._stats, generation, stats)

    def _on_assign(self, generation: int, consumer: Consumer, partitions: list[Any]) -> None:
        self.call_trio(self._assigned, generation, partitions)

    def _on_revoke(self, generation: int, consumer: Consumer, partitions: list[Any]) -> None:
        offsets = self.call_trio(lambda: self._revoked(generation, partitions, lost=False))
        if offsets:
            try:
                consumer.commit(offsets=to_tps(offsets), asynchronous=False)
            except KafkaException as exc:
                log.warning(
                    "commit on revoke failed",
                    extra={"job_type": self._job_type, "error": str(bus_error("commit", exc))},
                )

    def _on_lost(self, generation: int, consumer: Consumer, partitions: list[Any]) -> None:
        self.call_trio(lambda: self._revoked(generation, partitions, lost=True))

    def _on_commit(
        self, generation: int, err: KafkaError | None, partitions: list[TopicPartition]
    ) -> None:
        failed = [p for p in partitions if p.error is not None]
        if err is not None and err.code() == KafkaError._NO_OFFSET:
            return
        if err is None and not failed:
            self.call_trio(self.committed, generation, [], None, 0)
            return
        if err is not None:
            reason, code = f"{err.name()} ({err.str()})", err.code()
        else:
            first = failed[0].error
            assert first is not None
            reason, code = f"{first.name()} ({first.str()})", first.code()
        self.call_trio(self.committed, generation, failed or partitions, reason, code)

    def call_trio(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run bookkeeping on the trio thread (from a worker thread); the hop waits for it
        (microseconds). Returns None if trio is gone or the bookkeeping raised."""
        try:
            return trio.from_thread.run_sync(fn, *args)
        except trio.RunFinishedError:
            return None
        except Exception:
            # An exception escaping a callback would surface from poll() in the wrong place.
            log.exception("rebalance bookkeeping failed", extra={"job_type": self._job_type})
            return None
