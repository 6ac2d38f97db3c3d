"""Topic administration through confluent-kafka's AdminClient.

At run time the roles make one kind of admin request: ``create_topics``, the first time a
process needs a topic its metadata does not show. librdkafka's admin requests can abort
the process when they time out while the broker is gone (librdkafka #4605, #3663), so a
create is only attempted right after a metadata request (not an admin request) answered
and showed the topic missing; while the broker is unreachable, ensuring a topic fails at
the metadata step and no admin request is made. No group API is called at run time.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging

import trio
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

# ``confluent_kafka.admin.NewTopic`` is this class re-exported; its stub lacks the export.
from confluent_kafka.cimpl import NewTopic

from jobscheduler.errors import BusError

from ._common import DELIVERY_GRACE, HOP, bus_error

log = logging.getLogger(__name__)

#: Bound on the metadata request that precedes a topic creation.
METADATA_TIMEOUT = 5.0


def absent_topics(admin: AdminClient, topics: list[str], timeout: float) -> list[str]:
    """Which of ``topics`` the cluster's metadata does not list (blocking, bounded by
    ``timeout``). Raises KafkaException when the cluster does not answer."""
    listed = admin.list_topics(timeout=timeout).topics
    return [topic for topic in topics if topic not in listed]


async def create_topics(
    admin: AdminClient,
    topics: list[str],
    *,
    partitions: int,
    request_timeout: float,
    limiter: trio.CapacityLimiter,
) -> None:
    """Create those of ``topics`` the metadata does not list (replication 1); an existing
    topic is fine. Bounded by ``request_timeout`` plus a grace; raises BusError on failure,
    without an admin request when the metadata request fails."""
    timeout = request_timeout
    try:
        absent = await trio.to_thread.run_sync(
            absent_topics, admin, topics, min(timeout, METADATA_TIMEOUT),
            limiter=limiter, abandon_on_cancel=True,
        )  # fmt: skip
    except KafkaException as exc:
        # The broker is unreachable: no admin request (see the module docstring).
        raise bus_error(f"cannot check topics {topics}", exc) from exc
    if not absent:
        log.debug("topics exist", extra={"topics": topics})
        return
    new = [NewTopic(t, num_partitions=partitions, replication_factor=1) for t in absent]
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
        raise BusError(f"timed out creating topics {absent}")
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
