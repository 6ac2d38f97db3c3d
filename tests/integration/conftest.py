"""Fixtures on the shared servers (``scripts/deps.sh up``): role processes (see
tests/support/cluster.py), and a database and a MongoJobStore of their own for the
MongoJobStore tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jobscheduler.store.mongo import MongoJobStore
from tests.contract.store_fixtures import drop_database, mongo_uri, unique_database_name
from tests.support.cluster import (
    Cluster,
    EtcdAdmin,
    RoleProcess,
    etcd_endpoint,
    kafka_brokers,
    metric_value,
    open_cluster,
    parse_time,
    pytest_runtest_makereport,
    utc_now,
)
from tests.support.stores import started

__all__ = [
    "Cluster",
    "EtcdAdmin",
    "RoleProcess",
    "kafka_brokers",
    "metric_value",
    "parse_time",
    "pytest_runtest_makereport",
    "utc_now",
]


@pytest.fixture
async def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    """This test's role processes, database and election; see tests/support/cluster.py."""
    async with open_cluster(tmp_path, request) as cluster:
        yield cluster


@pytest.fixture
async def etcd_admin() -> AsyncIterator[EtcdAdmin]:
    admin = EtcdAdmin(etcd_endpoint())
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


# -- MongoJobStore tests (test_mongo_store*.py) --------------------------------------------


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A database of its own on the shared server, dropped afterwards."""
    name = unique_database_name("js_mongo")
    try:
        yield name
    finally:
        await drop_database(mongo_uri(), name)


@pytest.fixture
async def store(database: str) -> AsyncIterator[MongoJobStore]:
    """A started MongoJobStore on ``database``."""
    async with started(MongoJobStore(mongo_uri(), database)) as store:
        yield store
