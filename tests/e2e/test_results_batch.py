"""Bulk enqueue, results and attempt history against a real ``jobscheduler dev``, over HTTP."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import trio

from tests.support.dev_server import DevServer

from .conftest import wait_for_job

pytestmark = pytest.mark.e2e

Factory = Callable[..., Awaitable[DevServer]]
Body = Callable[..., dict[str, Any]]


async def test_a_batch_is_answered_in_order_and_its_jobs_run(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory()
    existing = (await client.post(f"{server.url}/jobs", json=job_body())).json()
    jobs = [job_body() for _ in range(200)]
    jobs[10] = job_body(idempotencyKey=existing["idempotencyKey"])
    jobs[20] = job_body(jobType="log-message", payload={})
    jobs[30] = dict(jobs[0])

    reply = await client.post(f"{server.url}/jobs/batch", json={"jobs": jobs})

    assert reply.status_code == 200, reply.text
    results = reply.json()["results"]
    assert len(results) == len(jobs)
    statuses = [r["status"] for r in results]
    assert statuses.count(201) == 197
    assert (statuses[10], statuses[20], statuses[30]) == (409, 400, 409)
    assert results[10]["jobId"] == existing["id"]
    assert results[30]["jobId"] == results[0]["job"]["id"]
    assert "payload.message" in results[20]["error"]
    created = [r["job"]["id"] for r in results if r["status"] == 201]
    with trio.fail_after(30):
        while True:
            listed = await client.get(
                f"{server.url}/jobs",
                params={"tenantId": "tenant-e2e", "status": "completed", "limit": "5000"},
            )
            done = {j["id"] for j in listed.json()}
            if done >= set(created):
                break
            await trio.sleep(0.1)
    assert len(done) == len(created) + 1  # and the job created before the batch

    too_many = await client.post(f"{server.url}/jobs/batch", json={"jobs": [job_body()] * 1001})
    assert too_many.status_code == 400
    assert "at most 1000" in too_many.json()["error"]


async def test_a_result_and_every_attempt_are_shown(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory(WORKER_ID="worker-e2e")
    slow = (
        await client.post(
            f"{server.url}/jobs", json=job_body(jobType="slow", payload={"sleepMs": 10})
        )
    ).json()
    flaky = (
        await client.post(
            f"{server.url}/jobs",
            json=job_body(jobType="flaky", payload={"failRate": 1}, maxAttempts=2),
        )
    ).json()

    done = await wait_for_job(client, server, slow["id"], lambda j: j["status"] == "completed")
    assert done["result"] == {"sleptMs": 10}
    assert done["attempts"] == 1
    [attempt] = (await client.get(f"{server.url}/jobs/{slow['id']}/attempts")).json()["attempts"]
    assert (attempt["number"], attempt["outcome"], attempt["worker"]) == (
        1,
        "completed",
        "worker-e2e",
    )
    assert attempt["startedAt"] <= attempt["finishedAt"]

    dead = await wait_for_job(
        client, server, flaky["id"], lambda j: j["status"] == "dlq", timeout=30
    )
    assert dead["attempts"] == 2
    assert "result" not in dead
    history = (await client.get(f"{server.url}/jobs/{flaky['id']}/attempts")).json()
    assert history["jobId"] == flaky["id"]
    attempts = history["attempts"]
    assert [(a["number"], a["outcome"], a["errorType"]) for a in attempts] == [
        (1, "failed", "HandlerError"),
        (2, "failed", "HandlerError"),
    ]
    for record in attempts:
        assert record["errorMessage"].startswith("flaky: simulated failure")
        assert "Traceback (most recent call last)" in record["traceback"]
        assert "in flaky" in record["traceback"]
    assert dead["lastError"] == f"HandlerError: {attempts[-1]['errorMessage']}"
