"""The whole lifecycle against a real ``jobscheduler dev`` subprocess, over HTTP: a job
completing, retried and dead-lettered, cron templates, the reaper, heartbeats, the request
line limit, readiness and the metrics listener."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import trio

from jobscheduler.domain.model import parse_time

from .conftest import wait_for_job
from .lifecycle_steps import Body, Factory, create, is_status, metric

pytestmark = pytest.mark.e2e


async def test_a_due_job_completes_with_claim_fields(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory()
    job = await create(
        client, server, job_body(jobType="log-message", payload={"message": "hello"}, priority=5)
    )
    done = await wait_for_job(client, server, job["id"], is_status("completed"))
    assert done["attempts"] == 1  # attempts started: the first one completed
    assert done["claimedBy"]
    assert parse_time(done["claimedAt"], "claimedAt") >= parse_time(done["createdAt"], "createdAt")
    assert "lastError" not in done
    assert "hello" in server.log()


async def test_flaky_job_retries_with_backoff_then_dead_letters(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory()
    job = await create(client, server, job_body(jobType="flaky", payload={"failRate": 1}))
    first = await wait_for_job(client, server, job["id"], lambda j: "lastError" in j)
    assert first["status"] in ("pending", "queued", "claimed", "running")
    assert "simulated failure" in first["lastError"]
    if first["status"] == "pending":
        # Backoff after attempt 1 is 2 s: scheduledAt moved ~2 s past the failure.
        delay = parse_time(first["scheduledAt"], "s") - parse_time(first["updatedAt"], "u")
        assert timedelta(seconds=1.9) <= delay <= timedelta(seconds=2.1)
    dead = await wait_for_job(client, server, job["id"], is_status("dlq"), timeout=30)
    assert dead["attempts"] == 3
    assert "simulated failure" in dead["lastError"]
    # Attempts 1 -> 2 waited 2 s, 2 -> 3 waited 4 s: at least 6 s from claim to dead letter.
    elapsed = parse_time(dead["updatedAt"], "u") - parse_time(first["claimedAt"], "c")
    assert elapsed >= timedelta(seconds=5.9)
    listed = await client.get(
        f"{server.url}/jobs", params={"tenantId": "tenant-e2e", "status": "dlq"}
    )
    assert [j["id"] for j in listed.json()] == [job["id"]]
    assert await metric(client, server, "executor_jobs_processed_total") == 3


async def test_cron_template_spawns_one_instance_per_fire_time(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory()
    # Yearly, so no second fire time can come due while the test watches (a per-minute
    # template would legitimately fire again when the test straddles a minute boundary).
    template = await create(
        client, server, job_body(cron="0 0 1 1 *", scheduledAt=None, idempotencyKey="yearly")
    )
    first_fire = parse_time(template["scheduledAt"], "s")
    assert first_fire > datetime.now(UTC)
    # Make the template due now (its previous fire time) instead of waiting for next year.
    fire = datetime(datetime.now(UTC).year, 1, 1, tzinfo=UTC)
    with server.db() as db:
        db.execute(
            "UPDATE jobs SET scheduled_at = ? WHERE id = ?",
            (int(fire.timestamp() * 1000), template["id"]),
        )
    expected_key = f"yearly-run-{int(fire.timestamp()) * 1_000_000_000}"

    async def instances() -> list[dict[str, Any]]:
        response = await client.get(f"{server.url}/jobs", params={"tenantId": "tenant-e2e"})
        return [j for j in response.json() if j["idempotencyKey"].startswith("yearly-run-")]

    with trio.fail_after(10):
        while not (found := await instances()) or found[0]["status"] != "completed":
            await trio.sleep(0.1)
    await trio.sleep(1.5)  # several scheduler ticks: no second instance for the same fire time
    found = await instances()
    assert [j["idempotencyKey"] for j in found] == [expected_key]
    assert "cron" not in found[0]
    moved = (await client.get(f"{server.url}/jobs/{template['id']}")).json()
    assert moved["status"] == "pending"
    assert parse_time(moved["scheduledAt"], "s") > datetime.now(UTC) - timedelta(seconds=1)
    assert await metric(client, server, "scheduler_cron_instances_spawned_total") == 1


async def test_template_with_unparseable_cron_is_dead_lettered(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory()
    template = await create(client, server, job_body(cron="0 2 * * *", scheduledAt=None))
    with server.db() as db:  # hand-edited in the store, as the seed describes
        db.execute(
            "UPDATE jobs SET cron = 'not a cron', scheduled_at = 0 WHERE id = ?", (template["id"],)
        )
    dead = await wait_for_job(client, server, template["id"], is_status("dlq"))
    assert "cron" in dead["lastError"]
    assert await metric(client, server, "scheduler_invalid_cron_templates_total") == 1


async def test_reaper_repends_a_job_stuck_in_queued(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory(QUEUED_TIMEOUT="1s", REAPER_INTERVAL="200ms")
    job = await create(client, server, job_body(scheduledAt="2099-01-01T00:00:00Z"))
    # Simulate a claim whose wake-up never reached an executor (lost Kafka message).
    queued_at = int((datetime.now(UTC) - timedelta(seconds=2)).timestamp() * 1000)
    with server.db() as db:
        db.execute(
            "UPDATE jobs SET status = 'queued', queued_at = ?, scheduled_at = 0 WHERE id = ?",
            (queued_at, job["id"]),
        )
    done = await wait_for_job(client, server, job["id"], is_status("completed"))
    assert done["attempts"] == 1  # recovery from queued cost no attempt: one run, one attempt
    assert await metric(client, server, "reaper_recovered_jobs_total", sweep="queued") == 1


async def _send_over_long_request_line(port: int) -> bytes:
    """Send a 100 KB request line and read what comes back, reading while still sending.

    hypercorn answers once its first read (64 KB) holds no complete line, then closes with
    the rest unread, which resets the connection: the send may fail (a broken pipe) and a
    reset that arrives before the answer is read discards it (b"" here; the caller tries
    again).
    """
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    reply = b""

    async def send() -> None:
        with contextlib.suppress(trio.BrokenResourceError):
            await stream.send_all(
                b"GET /jobs?tenantId=" + b"t" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
            )

    async with stream, trio.open_nursery() as nursery:
        nursery.start_soon(send)
        with trio.fail_after(10), contextlib.suppress(trio.BrokenResourceError):
            while chunk := await stream.receive_some(65536):
                reply += chunk
    return reply


async def test_over_long_request_line_is_431_with_the_json_error_shape(
    dev_factory: Factory,
) -> None:
    # Bug: hypercorn answered 431 with an empty body. (Raw bytes: httpx refuses to
    # send a URL this long.)
    server = await dev_factory()
    reply = b""
    for _ in range(5):
        reply = await _send_over_long_request_line(server.api_port)
        if reply:
            break
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ")
    assert b"\r\ncontent-type: application/json" in head.lower()
    assert list(json.loads(body)) == ["error"]


async def test_readyz_reports_the_store_and_healthz_stays_liveness(
    dev_factory: Factory, client: httpx.AsyncClient
) -> None:
    server = await dev_factory()
    ready = await client.get(f"{server.metrics_url}/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ok", "checks": {"store": "ok"}}
    live = await client.get(f"{server.metrics_url}/healthz")
    assert (live.status_code, live.text) == (200, "ok")


async def test_heartbeating_job_longer_than_claim_timeout_is_not_reaped(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory(
        CLAIM_TIMEOUT="1s", HEARTBEAT_INTERVAL="200ms", REAPER_INTERVAL="100ms"
    )
    job = await create(client, server, job_body(jobType="slow", payload={"sleepMs": 3000}))
    done = await wait_for_job(client, server, job["id"], is_status("completed"), timeout=20)
    assert done["attempts"] == 1
    assert "lastError" not in done
    assert await metric(client, server, "reaper_recovered_jobs_total") == 0


async def test_metrics_listener_serves_every_metric_name(
    dev_factory: Factory, client: httpx.AsyncClient
) -> None:
    server = await dev_factory()
    text = (await client.get(f"{server.metrics_url}/metrics")).text
    for name in (
        "scheduler_tick_duration_seconds",
        "scheduler_jobs_claimed_total",
        "scheduler_dispatch_errors_total",
        "scheduler_cron_instances_spawned_total",
        "scheduler_invalid_cron_templates_total",
        "scheduler_is_leader 1.0",
        "reaper_recovered_jobs_total",
    ):
        assert name in text
    assert (await client.get(f"{server.metrics_url}/healthz")).text == "ok"
    assert json.loads((await client.get(f"{server.metrics_url}/nope")).text) == {
        "error": "not found"
    }
