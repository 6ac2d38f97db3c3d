"""What a Kafka subscription does on its worker thread: one blocking hop of commit, flow
control and poll, and the final commit and close. Everything else of the subscription
(:mod:`.consumer`) runs on the trio thread; these functions touch trio state only through
:meth:`~.group.GroupEvents.call_trio`."""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from ._common import bus_error
from .group import GroupEvents, to_tps
from .offsets import TP, TPO, OffsetBook

# The subscription logs under one name, whichever thread or module a line comes from.
log = logging.getLogger("jobscheduler.bus.kafka.consumer")


def poll_cycle(
    consumer: Consumer | None,
    group_events: GroupEvents,
    commits: list[TPO],
    pause: list[TP],
    resume: list[TPO],
    max_messages: int,
    timeout: float,
) -> list[Message]:
    """One blocking hop: commit, apply flow control, poll up to ``max_messages``."""
    assert consumer is not None
    if commits:
        try:
            consumer.commit(offsets=to_tps(commits), asynchronous=True)
        except KafkaException as exc:  # e.g. no longer a group member: retry next cycle
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            group_events.call_trio(
                group_events.committed,
                group_events.generation,
                to_tps(commits),
                str(bus_error("commit", exc)),
                error.code() if error is not None else 0,
            )
    try:
        if pause:
            consumer.pause([TopicPartition(t, p) for t, p in pause])
        if resume:
            consumer.resume([TopicPartition(t, p) for t, p, _ in resume])
            for t, p, offset in resume:
                if offset >= 0:
                    consumer.seek(TopicPartition(t, p, offset))  # a failure: slower resume
    except KafkaException as exc:  # e.g. a partition revoked in between: harmless
        log.debug("pause/resume failed", extra={"error": str(exc)})
    first = consumer.poll(timeout)
    if first is None:
        return []
    if max_messages <= 1:
        return [first]
    return [first, *consumer.consume(num_messages=max_messages - 1, timeout=0)]


def final_commit_and_close(
    consumer: Consumer, group_events: GroupEvents, book: OffsetBook, job_type: str
) -> None:
    """Commit every contiguous settled position (read on the trio thread) and leave the
    group; the consumer is closed whatever the commit did."""
    offsets = group_events.call_trio(book.all_positions)
    try:
        if offsets:
            consumer.commit(offsets=to_tps(offsets), asynchronous=False)
    except KafkaException as exc:
        log.warning(
            "final commit failed",
            extra={"job_type": job_type, "error": str(bus_error("commit", exc))},
        )
    finally:
        consumer.close()
