"""Webhook jobs on a real ``jobscheduler dev`` (HTTP_ALLOWLIST=127.0.0.1): one reaches a
local echo server and completes; one aimed at the cloud-metadata address is refused by the
guard and dead-lettered without reaching anything."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from tests.support.dev_server import DevServer
from tests.support.http_echo import EchoServer, echo_server

from .conftest import wait_for_job

pytestmark = pytest.mark.e2e

Factory = Callable[..., Awaitable[DevServer]]
Body = Callable[..., dict[str, Any]]

#: Generous upper bound: a refused job is retried with backoff (2 s, 4 s) unless the
#: executor already dead-letters PermanentError at once.
DLQ_TIMEOUT = 60.0


@pytest.fixture
async def server() -> AsyncIterator[EchoServer]:
    async with echo_server() as running:
        yield running


async def test_http_job_reaches_an_allowlisted_local_server_and_completes(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body, server: EchoServer
) -> None:
    dev = await dev_factory(HTTP_ALLOWLIST="127.0.0.1")
    payload = {"url": f"{server.base}/echo", "json": {"event": "signup", "user": 7}}
    response = await client.post(f"{dev.url}/jobs", json=job_body(jobType="http", payload=payload))
    assert response.status_code == 201, response.text
    job = await wait_for_job(
        client, dev, response.json()["id"], lambda j: j["status"] in ("completed", "dlq")
    )
    assert job["status"] == "completed", job
    (seen,) = server.requests
    assert seen["method"] == "POST"
    assert json.loads(seen["body"]) == {"event": "signup", "user": 7}


async def test_http_job_to_cloud_metadata_is_refused_and_dead_lettered(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body, server: EchoServer
) -> None:
    dev = await dev_factory(HTTP_ALLOWLIST="127.0.0.1")
    payload = {"url": "http://169.254.169.254/latest/meta-data/", "timeoutMs": 60_000}
    response = await client.post(f"{dev.url}/jobs", json=job_body(jobType="http", payload=payload))
    assert response.status_code == 201, response.text
    job = await wait_for_job(
        client,
        dev,
        response.json()["id"],
        lambda j: j["status"] in ("completed", "dlq"),
        timeout=DLQ_TIMEOUT,
    )
    assert job["status"] == "dlq", job
    assert "refused" in job["lastError"]
    assert "169.254.169.254 is link-local (cloud metadata)" in job["lastError"]
    # Refused by the guard, which runs before any connection: a connection attempt to the
    # unroutable address would have timed out (60 s) instead, or failed as a ConnectError.
    assert "http request refused" in dev.log()
    assert "ConnectError" not in job["lastError"]
    assert server.requests == []


async def test_a_credentialed_webhook_url_is_a_400_on_a_real_dev(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    dev = await dev_factory()
    payload = {"url": "https://user:secret@hooks.example.com/x"}
    response = await client.post(f"{dev.url}/jobs", json=job_body(jobType="http", payload=payload))
    assert response.status_code == 400
    assert "credentials in the URL" in response.json()["error"]
