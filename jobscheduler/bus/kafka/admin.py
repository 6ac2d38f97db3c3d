"""Topic and group administration through confluent-kafka's AdminClient."""

from __future__ import annotations

import concurrent.futures
import functools
import logging

import trio
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

# ``confluent_kafka.admin.NewTopic`` is this class re-exported; its stub lacks the export.
from confluent_kafka.cimpl import NewTopic

from ...errors import BusError
from ._common import DELIVERY_GRACE, HOP, bus_error

log = logging.getLogger(__name__)


async def create_topics(
    admin: AdminClient,
    topics: list[str],
    *,
    partitions: int,
    request_timeout: float,
    limiter: trio.CapacityLimiter,
) -> None:
    """Create ``topics`` (replication 1); an existing topic is fine. Bounded by
    ``request_timeout`` plus a grace; raises BusError on failure."""
    timeout = request_timeout
    new = [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics]
    try:
        futures: dict[str, concurrent.futures.Future[None]] = admin.create_topics(
            new, request_timeout=timeout, operation_timeout=timeout
        )
    except KafkaException as exc:
        raise bus_error("cannot create topics", exc) from exc
    pending: set[concurrent.futures.Future[None]] = set(futures.values())
    with trio.move_on_after(timeout + DELIVERY_GRACE):
        while pending:
            _, pending = await trio.to_thread.run_sync(
                functools.partial(concurrent.futures.wait, pending, timeout=HOP),
                limiter=limiter,
            )
    if pending:
        raise BusError(f"timed out creating topics {topics}")
    created = []
    for topic, future in futures.items():
        error = future.exception()
        if error is None:
            created.append(topic)
            log.info("topic created", extra={"topic": topic, "partitions": partitions})
        elif (
            isinstance(error, KafkaException)
            and error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
        ):
            log.debug("topic exists", extra={"topic": topic})
        else:
            raise bus_error(f"cannot create topic {topic}", error)
    if created:
        await await_metadata(admin, created, request_timeout=timeout, limiter=limiter)


async def await_metadata(
    admin: AdminClient,
    topics: list[str],
    *,
    request_timeout: float,
    limiter: trio.CapacityLimiter,
) -> None:
    """Wait (bounded) until new topics have leaders in the cluster's metadata.

    A group member that subscribes before the coordinator has seen the topic gets an
    empty assignment and learns better only on its next heartbeat (5 s by default).
    Waiting for the metadata makes that rare (it remains possible: the coordinator's
    view is updated asynchronously); it only concerns a job type's first subscription.
    """

    def ready() -> bool:
        metadata = admin.list_topics(timeout=HOP)
        for topic in topics:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                return False
            if any(p.leader < 0 for p in found.partitions.values()):
                return False
        return True

    with trio.move_on_after(request_timeout):
        while True:
            try:
                if await trio.to_thread.run_sync(ready, limiter=limiter):
                    return
            except KafkaException as exc:
                log.debug("metadata not available yet", extra={"error": str(exc)})
            await trio.sleep(0.05)
    log.warning("new topics not visible in metadata yet", extra={"topics": topics})


def group_member_ids(admin: AdminClient, group: str, timeout: float) -> set[str]:
    """The member ids the group coordinator lists for ``group`` now (blocking, bounded by
    ``timeout``). Raises KafkaException (or a timeout error) when it cannot tell."""
    future = admin.describe_consumer_groups([group], request_timeout=timeout)[group]
    description = future.result(timeout=timeout)
    return {member.member_id for member in description.members}


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
        raise bus_error(f"cannot delete topics starting with {prefix!r}", exc) from exc
    return ours
