"""Processes killed, stopped and restarted, against real ``jobscheduler dev`` subprocesses:
a killed dev's running job rerun by its successor, a second dev on the same file refused, a
zombie executor's stale write refused, every accepted job completed after ``kill -9``, a
SIGTERM's grace, and lost in-process wake-ups re-pended on restart."""

from __future__ import annotations

import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import trio

from jobscheduler.domain.model import format_time
from tests.support.dev_server import DevServer
from tests.support.processes import run_cli

from .conftest import wait_for_job
from .lifecycle_steps import Body, Factory, create, is_status, metric

pytestmark = pytest.mark.e2e


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
