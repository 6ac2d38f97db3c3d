"""Fixtures shared by the contract test modules."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest

from jobscheduler.bus.kafka import delete_prefixed_topics
from jobscheduler.errors import BusError

from .bus_fixtures import KAFKA_BROKERS


@pytest.fixture(scope="module")
def kafka_topic_prefix() -> Iterator[str]:
    """This module run's topic prefix; its topics are deleted afterwards."""
    prefix = f"contract-{uuid.uuid4().hex[:8]}."
    yield prefix
    with contextlib.suppress(BusError):  # the broker was unreachable: the tests said so
        delete_prefixed_topics(KAFKA_BROKERS, prefix, timeout=10)
