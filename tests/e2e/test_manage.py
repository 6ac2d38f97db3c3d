"""Managing jobs on a real ``jobscheduler dev``: cancel of a pending job and of
a running one (``async def`` and ``def`` handlers), retry of a dead job with a new payload,
bulk retry of 1,000 dead jobs, and a cron template paused across a fire time, resumed
without a burst, triggered, re-scheduled and retired.

Wall-clock bounds are generous upper limits; nothing asserts that something is fast.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.support.apps import GATE_APP, write_app
from tests.support.dev_server import DevServer
from tests.support.jobs_api import create_job
from tests.support.processes import ends_within

from .conftest import NapRunning, wait_for_job

pytestmark = pytest.mark.e2e

Factory = Callable[..., Awaitable[DevServer]]
Body = Callable[..., dict[str, Any]]


@pytest.fixture
def gate_app(tmp_path: Path) -> dict[str, str]:
    env = write_app(tmp_path / "gate-app", "gate", GATE_APP)
    return {"JOBSCHEDULER_APP": "gate", **env, "LOG_LEVEL": "INFO"}


async def create(client: httpx.AsyncClient, server: DevServer, body: dict[str, Any]) -> Any:
    return await create_job(client, server, body)


async def act(
    client: httpx.AsyncClient, server: DevServer, path: str, body: Any = None, status: int = 200
) -> Any:
    response = await client.post(f"{server.url}{path}", json=body)
    assert response.status_code == status, response.text
    return response.json()


async def dead_job(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> tuple[DevServer, dict[str, Any]]:
    """A dev server and a ``flaky`` job that failed its one attempt: (server, the dead job)."""
    server = await dev_factory()
    job = await create(
        client, server, job_body(jobType="flaky", payload={"failRate": 1}, maxAttempts=1)
    )
    return server, await wait_for_job(client, server, job["id"], lambda j: j["status"] == "dlq")


# ----------------------------------------------------------------------------- cancel


async def test_cancel_of_a_pending_job_means_it_never_runs(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory()
    soon = datetime.now(UTC).timestamp() + 2
    at = datetime.fromtimestamp(soon, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    job = await create(client, server, job_body(scheduledAt=at))
    cancelled = await act(client, server, f"/jobs/{job['id']}/cancel")
    assert cancelled["status"] == "cancelled"
    await trio.sleep(3)  # past its scheduledAt and several scheduler ticks
    after = (await client.get(f"{server.url}/jobs/{job['id']}")).json()
    assert (after["status"], after["attempts"]) == ("cancelled", 0)


async def test_cancel_of_a_running_async_handler_stops_it_within_a_heartbeat(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory(HEARTBEAT_INTERVAL="200ms")
    job = await create(client, server, job_body(jobType="slow", payload={"sleepMs": 600_000}))
    await wait_for_job(client, server, job["id"], lambda j: j["status"] == "running")
    requested = await act(client, server, f"/jobs/{job['id']}/cancel", status=202)
    assert requested["status"] == "running"
    assert "cancelRequestedAt" in requested
    done = await wait_for_job(client, server, job["id"], lambda j: j["status"] != "running")
    assert done["status"] == "cancelled"
    assert done["lastError"] == "cancelled while running"
    again = await client.post(f"{server.url}/jobs/{job['id']}/cancel")
    assert (again.status_code, again.json()["status"]) == (200, "cancelled")


async def test_cancel_of_a_running_def_handler_kills_its_worker_process(
    nap_running: NapRunning, client: httpx.AsyncClient
) -> None:
    server, job_id, pid = await nap_running(HEARTBEAT_INTERVAL="200ms")
    await act(client, server, f"/jobs/{job_id}/cancel", status=202)
    done = await wait_for_job(client, server, job_id, lambda j: j["status"] != "running")
    assert done["status"] == "cancelled"
    assert await ends_within(pid, 20)


# ----------------------------------------------------------------------------- retry


async def test_retry_of_a_dead_job_with_a_new_payload_completes_it(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server, job = await dead_job(dev_factory, client, job_body)
    retried = await act(client, server, f"/jobs/{job['id']}/retry", {"payload": {"failRate": 0}})
    assert (retried["status"], retried["attempts"]) == ("pending", 0)
    assert retried["replays"][0]["previousError"] == job["lastError"]
    done = await wait_for_job(client, server, job["id"], lambda j: j["status"] == "completed")
    assert done["payload"] == {"failRate": 0}
    assert len(done["replays"]) == 1


async def test_a_retried_job_that_fails_again_keeps_the_attempts_of_both_runs(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server, job = await dead_job(dev_factory, client, job_body)
    retried = await act(client, server, f"/jobs/{job['id']}/retry", {})
    assert retried["replays"][0]["run"] == 1
    await wait_for_job(
        client, server, job["id"], lambda j: j["status"] == "dlq" and j["attempts"] == 1
    )
    reply = await client.get(f"{server.url}/jobs/{job['id']}/attempts")
    assert reply.status_code == 200
    assert [(a["run"], a["number"], a["outcome"]) for a in reply.json()["attempts"]] == [
        (0, 1, "failed"),
        (1, 1, "failed"),
    ]


async def test_bulk_retry_of_a_thousand_dead_jobs_runs_every_one_again(
    dev_factory: Factory,
    client: httpx.AsyncClient,
    job_body: Body,
    gate_app: dict[str, str],
    tmp_path: Path,
) -> None:
    closed = tmp_path / "closed"
    closed.write_text("")
    server = await dev_factory(**gate_app)
    payload = {"closed": str(closed)}
    limiter = trio.CapacityLimiter(16)

    async def one(i: int) -> None:
        async with limiter:
            await create(client, server, job_body(jobType="gate", payload=payload))

    async with trio.open_nursery() as nursery:
        for i in range(1000):
            nursery.start_soon(one, i)

    async def counts() -> dict[str, int]:
        stats = await client.get(f"{server.url}/stats", params={"tenantId": "tenant-e2e"})
        assert stats.status_code == 200, stats.text
        by_status: dict[str, int] = stats.json()["byStatus"]
        return by_status

    with trio.fail_after(120):
        while (await counts()).get("dlq") != 1000:
            await trio.sleep(0.2)
    closed.unlink()
    started = time.monotonic()
    result = await act(
        client, server, "/jobs/retry", {"filter": {"tenantId": "tenant-e2e", "status": "dlq"}}
    )
    elapsed = time.monotonic() - started
    print(f"bulk retry of 1,000 dlq jobs on dev: {elapsed * 1000:.0f} ms")
    assert result == {"matched": 1000, "changed": 1000, "cancelRequested": 0}
    with trio.fail_after(120):
        while (await counts()).get("completed") != 1000:
            await trio.sleep(0.2)
    repeat = await act(
        client, server, "/jobs/retry", {"filter": {"tenantId": "tenant-e2e", "status": "dlq"}}
    )
    assert repeat["changed"] == 0


# ----------------------------------------------------------------------------- templates


async def test_cron_template_pause_resume_trigger_update_and_delete(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory()
    template = await create(
        client, server, job_body(scheduledAt=None, cron="*/5 * * * *", idempotencyKey="tmpl")
    )
    tid = template["id"]
    runs_url = f"{server.url}/jobs"
    runs_query = {"tenantId": "tenant-e2e", "templateId": tid}

    async def runs() -> list[dict[str, Any]]:
        response = await client.get(runs_url, params=runs_query)
        assert response.status_code == 200, response.text
        listed: list[dict[str, Any]] = response.json()
        return listed

    paused = await act(client, server, f"/jobs/{tid}/pause")
    assert paused["status"] == "paused"
    # A fire time passes while paused (moved into the past in the file: the clock is real).
    with server.db() as db:
        db.execute("UPDATE jobs SET scheduled_at = 0 WHERE id = ?", (tid,))
    await trio.sleep(2)  # several scheduler ticks
    assert await runs() == []
    resumed = await act(client, server, f"/jobs/{tid}/resume")
    assert resumed["status"] == "pending"
    assert resumed["scheduledAt"] > datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    await trio.sleep(2)
    assert await runs() == []  # no burst of the missed fire times

    run = await act(client, server, f"/jobs/{tid}/trigger", status=201)
    assert run["templateId"] == tid
    await wait_for_job(client, server, run["id"], lambda j: j["status"] == "completed")
    assert [r["id"] for r in await runs()] == [run["id"]]

    patched = await client.patch(f"{server.url}/jobs/{tid}", json={"cron": "0 3 * * *"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["cron"] == "0 3 * * *"
    assert patched.json()["scheduledAt"].endswith("T03:00:00Z")

    retired = await client.delete(f"{server.url}/jobs/{tid}")
    assert (retired.status_code, retired.json()["status"]) == (200, "cancelled")
    assert [r["id"] for r in await runs()] == [run["id"]]  # its runs stay
