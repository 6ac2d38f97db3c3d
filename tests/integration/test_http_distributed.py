"""The ``http`` handler under the distributed roles (MongoDB, Kafka, etcd): an executor
started with ``JOB_TYPE=http`` and ``HTTP_ALLOWLIST=127.0.0.1`` delivers a webhook to a local
echo server, and dead-letters one aimed at the cloud-metadata address, refused by its guard
without reaching anything."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tests.integration.conftest import Cluster
from tests.support.http_echo import EchoServer, echo_server

pytestmark = pytest.mark.integration


@pytest.fixture
async def server() -> AsyncIterator[EchoServer]:
    async with echo_server() as running:
        yield running


async def test_http_jobs_on_the_distributed_roles(cluster: Cluster, server: EchoServer) -> None:
    api, scheduler, _executor = await cluster.start_all(
        ("api", {}),
        ("scheduler", {}),
        ("executor", {"JOB_TYPE": "http", "HTTP_ALLOWLIST": "127.0.0.1"}),
    )
    await cluster.leader([scheduler])
    delivered = await cluster.create_job(
        api, jobType="http", payload={"url": f"{server.base}/echo", "json": {"order": 12}}
    )
    refused = await cluster.create_job(
        api,
        jobType="http",
        payload={"url": "http://169.254.169.254/latest/meta-data/"},
        maxAttempts=1,
    )
    done = await cluster.wait_job(
        api, delivered["id"], lambda j: j["status"] in ("completed", "dlq"), timeout=60
    )
    assert done["status"] == "completed", done
    assert [json.loads(r["body"]) for r in server.requests] == [{"order": 12}]
    dead = await cluster.wait_job(
        api, refused["id"], lambda j: j["status"] in ("completed", "dlq"), timeout=60
    )
    assert dead["status"] == "dlq", dead
    assert "refused: 169.254.169.254 is link-local (cloud metadata)" in dead["lastError"]
    assert len(server.requests) == 1
