"""Fixtures shared by the contract test modules."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from jobscheduler.bus import Bus
from jobscheduler.bus.kafka import delete_prefixed_topics
from jobscheduler.errors import BusError
from jobscheduler.store import JobStore

from .bus_fixtures import ADAPTERS as BUS_ADAPTERS
from .bus_fixtures import KAFKA_BROKERS, BusHarness, KafkaHarness, LocalHarness
from .store_fixtures import ADAPTER_PARAMS, ADAPTERS


@pytest.fixture(params=ADAPTER_PARAMS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[JobStore]:
    """A started store of each adapter in turn (see ``store_fixtures``), closed afterwards."""
    async for adapter in ADAPTERS[request.param](tmp_path):
        yield adapter


@pytest.fixture(scope="module")
def kafka_topic_prefix() -> Iterator[str]:
    """This module run's topic prefix; its topics are deleted afterwards."""
    prefix = f"contract-{uuid.uuid4().hex[:8]}."
    yield prefix
    with contextlib.suppress(BusError):  # the broker was unreachable: the tests said so
        delete_prefixed_topics(KAFKA_BROKERS, prefix, timeout=10)


@pytest.fixture(params=BUS_ADAPTERS)
async def harness(request: pytest.FixtureRequest) -> BusHarness:
    if request.param == "local":
        return LocalHarness()
    kafka = KafkaHarness(KAFKA_BROKERS, request.getfixturevalue("kafka_topic_prefix"))
    await kafka.check_reachable()
    return kafka


@pytest.fixture
async def bus(harness: BusHarness) -> AsyncIterator[Bus]:
    adapter = await harness.open_bus()
    try:
        yield adapter
    finally:
        await adapter.close()
