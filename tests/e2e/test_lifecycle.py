"""The whole lifecycle against a real ``jobscheduler dev`` subprocess, over HTTP."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import trio

from jobscheduler.domain.model import format_time, parse_time
from jobscheduler.testing import metric_value
from tests.support.dev_server import DevServer
from tests.support.jobs_api import create_job
from tests.support.processes import run_cli

from .conftest import wait_for_job

pytestmark = pytest.mark.e2e

Factory = Callable[..., Awaitable[DevServer]]
Body = Callable[..., dict[str, Any]]


def is_status(*statuses: str) -> Callable[[dict[str, Any]], bool]:
    return lambda job: job["status"] in statuses


async def create(
    http: httpx.AsyncClient, server: DevServer, body: dict[str, Any]
) -> dict[str, Any]:
    created = await create_job(http, server, body)
    assert created["status"] == "pending"
    return created


async def metric(http: httpx.AsyncClient, server: DevServer, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    return metric_value((await http.get(f"{server.metrics_url}/metrics")).text, name, **labels)


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


async def test_restarted_dev_reruns_the_running_job_of_a_killed_dev_within_seconds(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    # Regression: after kill -9 the running job waited the whole CLAIM_TIMEOUT (5 min) for the
    # reaper. `dev` holds the lock on its file, so at start it recovers the dead process's
    # jobs at once. Default timings: CLAIM_TIMEOUT alone (45 s) would miss the bound below.
    server = await dev_factory()
    job = await create(client, server, job_body(jobType="slow", payload={"sleepMs": 3000}))
    running = await wait_for_job(client, server, job["id"], is_status("running"))
    server.kill()  # the executor dies mid-handler
    restarted = await dev_factory(SQLITE_PATH=str(server.db_path))
    done = await wait_for_job(client, restarted, job["id"], is_status("completed"), timeout=20)
    assert done["attempts"] == 2  # the lost run counted, then the one that completed
    assert done["lastError"].startswith("lost: the previous process")
    history = (await client.get(f"{restarted.url}/jobs/{job['id']}/attempts")).json()
    assert [(a["number"], a["outcome"]) for a in history["attempts"]] == [
        (1, "lost"),
        (2, "completed"),
    ]
    assert history["attempts"][0]["worker"] == running["claimedBy"]
    assert done["claimedBy"] != running["claimedBy"]  # the restarted process ran it
    assert await metric(client, restarted, "reaper_recovered_jobs_total", sweep="claimed") == 1


async def test_second_dev_on_the_same_file_is_refused_with_one_line_and_exit_2(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    server = await dev_factory()
    second = run_cli("dev", env={**server.env, "API_PORT": "0", "METRICS_PORT": "0"})
    assert second.returncode == 2
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert "already in use by another `jobscheduler dev`" in lines[0]
    assert str(server.db_path) in lines[0]
    await create(client, server, job_body())  # the first one is unaffected


#: Every role of `dev` on its SQLite file WITHOUT `dev`'s file lock: a stand-in for an
#: executor that does not honour the lock, to show the store's fencing holds regardless.
LOCKLESS_DEV = (
    "import trio; "
    "from jobscheduler.process.assembly import embedded_deps, run_roles; "
    "from jobscheduler.config import Settings; "
    "from jobscheduler.observability.logs import configure_logging; "
    "settings = Settings.from_env(); "
    "configure_logging(settings.log_level, settings.log_format, 'dev'); "
    "trio.run(run_roles, embedded_deps(settings), ['api', 'scheduler', 'executor', 'reaper'])"
)


async def test_zombie_executor_with_stale_claim_token_cannot_overwrite_the_newer_run(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    # Two processes on one SQLite file. A runs the job and freezes (SIGSTOP): no heartbeats.
    # B's reaper recovers the job and B runs it again with a fresh claim token. A wakes up
    # (SIGCONT) and tries to heartbeat/complete with its old token: rejected, so the final
    # state is B's run, not A's. (A second `dev` would be refused by A's lock, so B runs
    # the same roles without it.)
    env = {"CLAIM_TIMEOUT": "1s", "HEARTBEAT_INTERVAL": "200ms", "REAPER_INTERVAL": "100ms"}
    zombie = await dev_factory(WORKER_ID="worker-a", **env)
    job = await create(client, zombie, job_body(jobType="slow", payload={"sleepMs": 2000}))
    await wait_for_job(client, zombie, job["id"], is_status("running"))
    zombie.freeze()
    try:
        rescuer = await dev_factory(
            argv=[sys.executable, "-c", LOCKLESS_DEV],
            WORKER_ID="worker-b",
            SQLITE_PATH=str(zombie.db_path),
            **env,
        )
        await wait_for_job(
            client,
            rescuer,
            job["id"],
            lambda j: j["status"] == "running" and j["claimedBy"] == "worker-b",
            timeout=15,
        )
    finally:
        zombie.thaw()
    done = await wait_for_job(client, rescuer, job["id"], is_status("completed"), timeout=15)
    assert done["claimedBy"] == "worker-b"
    assert done["attempts"] == 2  # worker-a's lost attempt, then worker-b's
    assert done["lastError"].startswith("lost: executor worker-a")
    with trio.fail_after(10):
        while not await metric(client, zombie, "executor_jobs_processed_total", result="stale"):
            await trio.sleep(0.1)
    assert await metric(client, zombie, "executor_jobs_processed_total", result="completed") == 0


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


async def test_kill9_and_restart_completes_every_accepted_job(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    env = {
        "CLAIM_TIMEOUT": "2s",
        "HEARTBEAT_INTERVAL": "500ms",
        "REAPER_INTERVAL": "200ms",
        "QUEUED_TIMEOUT": "2s",
    }
    server = await dev_factory(**env)
    accepted: list[str] = []
    soon = format_time(datetime.now(UTC) + timedelta(seconds=1))
    for i in range(150):
        kind = i % 3
        body = (
            job_body()
            if kind == 0
            else job_body(jobType="slow", payload={"sleepMs": 300})
            if kind == 1
            else job_body(scheduledAt=soon)
        )
        accepted.append((await create(client, server, body))["id"])
    server.kill()
    restarted = await dev_factory(SQLITE_PATH=str(server.db_path), **env)
    with trio.fail_after(60):
        while True:
            response = await client.get(
                f"{restarted.url}/jobs", params={"tenantId": "tenant-e2e", "limit": "5000"}
            )
            statuses = {j["id"]: j["status"] for j in response.json()}
            if all(statuses.get(job_id) == "completed" for job_id in accepted):
                break
            await trio.sleep(0.2)
    assert set(statuses) == set(accepted)


async def job_row(server: DevServer, job_id: str) -> tuple[str, int]:
    with sqlite3.connect(server.db_path) as db:
        status, attempts = db.execute(
            "SELECT status, attempts FROM jobs WHERE id = ?", (job_id,)
        ).fetchone()
    return status, attempts


async def sigterm_while_slow_job_runs(
    dev_factory: Factory, client: httpx.AsyncClient, job: dict[str, Any], grace: str
) -> tuple[DevServer, tuple[str, int]]:
    """A dev server with SHUTDOWN_GRACE=``grace`` runs ``job`` (a ``slow`` one), gets SIGTERM
    while it runs and exits 0: (the server, the job's status and attempts as stored)."""
    server = await dev_factory(SHUTDOWN_GRACE=grace)
    created = await create(client, server, job)
    await wait_for_job(client, server, created["id"], is_status("running"))
    assert await server.stop() == 0
    return server, await job_row(server, created["id"])


async def test_sigterm_lets_a_running_job_finish_within_the_grace(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    job = job_body(jobType="slow", payload={"sleepMs": 1500})
    _, row = await sigterm_while_slow_job_runs(dev_factory, client, job, grace="10s")
    assert row == ("completed", 1)


async def test_sigterm_hands_back_a_job_still_running_at_the_grace_deadline(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    job = job_body(jobType="slow", payload={"sleepMs": 60000})
    server, row = await sigterm_while_slow_job_runs(dev_factory, client, job, grace="500ms")
    assert row == ("pending", 0)  # the attempt is taken back
    assert "job handed back on shutdown" in server.log()


async def test_restart_repends_jobs_whose_in_process_wake_up_was_lost(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body
) -> None:
    # QUEUED_TIMEOUT is long: only the start-up sweep (the in-process bus is not durable)
    # can explain a prompt recovery.
    env = {"QUEUED_TIMEOUT": "5m"}
    server = await dev_factory(**env)
    job = await create(client, server, job_body(scheduledAt="2099-01-01T00:00:00Z"))
    await server.stop()
    with server.db() as db:
        db.execute(
            "UPDATE jobs SET status = 'queued', queued_at = 1, scheduled_at = 0 WHERE id = ?",
            (job["id"],),
        )
    restarted = await dev_factory(SQLITE_PATH=str(server.db_path), **env)
    done = await wait_for_job(client, restarted, job["id"], is_status("completed"), timeout=10)
    assert done["attempts"] == 1


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
