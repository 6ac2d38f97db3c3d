"""Ensuring Kafka topics (``bus/kafka/admin.create_topics``) makes an admin request only
when a metadata request just answered and showed a topic missing. Regression:
librdkafka's admin requests can abort the process when they time out while the broker is
gone, so a broker that does not answer must fail the ensure before any admin request."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio
from confluent_kafka import KafkaError, KafkaException

from jobscheduler.bus.kafka.admin import create_topics
from jobscheduler.errors import BusError


class FakeAdmin:
    """Stands in for AdminClient: canned metadata, and a record of create requests."""

    def __init__(self, listed: set[str] | None) -> None:
        self.listed = listed  # None: the cluster does not answer
        self.create_requests: list[list[str]] = []

    def list_topics(self, timeout: float) -> Any:
        if self.listed is None:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "all brokers down"))
        return SimpleNamespace(topics={t: SimpleNamespace(error=None) for t in self.listed})

    def create_topics(self, new: list[Any], **_: Any) -> Any:
        self.create_requests.append([t.topic for t in new])
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "stop here"))


async def ensure(admin: FakeAdmin, topics: list[str]) -> None:
    await create_topics(
        admin,  # type: ignore[arg-type]
        topics,
        partitions=3,
        request_timeout=10.0,
        limiter=trio.CapacityLimiter(1),
    )


async def test_an_unreachable_broker_fails_the_ensure_without_an_admin_request() -> None:
    admin = FakeAdmin(listed=None)
    with pytest.raises(BusError, match="cannot check topics"):
        await ensure(admin, ["jobs.a", "jobs.dlq"])
    assert admin.create_requests == []


async def test_topics_the_metadata_lists_are_not_created() -> None:
    admin = FakeAdmin(listed={"jobs.a", "jobs.dlq", "other"})
    await ensure(admin, ["jobs.a", "jobs.dlq"])
    assert admin.create_requests == []


async def test_only_the_topics_the_metadata_lacks_are_created() -> None:
    admin = FakeAdmin(listed={"jobs.dlq"})
    with pytest.raises(BusError, match="cannot create topics"):
        await ensure(admin, ["jobs.a", "jobs.dlq"])
    assert admin.create_requests == [["jobs.a"]]
