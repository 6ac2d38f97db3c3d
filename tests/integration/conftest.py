"""Role processes on the shared servers (``scripts/deps.sh up``); see tests/support/cluster.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

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
    try:
        yield admin
    finally:
        admin.close()
