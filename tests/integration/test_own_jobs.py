"""The example app (``examples/myjobs.py``, copied outside the repository) under the
distributed roles: ``run-api --app`` validates with its validators, ``run-executor --app``
runs its handlers (an async one on trio, a ``def`` one in a worker process); the scheduler
and reaper run without it. And SIGTERM hands a sleeping ``def`` handler's job back within
SHUTDOWN_GRACE + 2 s on the real servers."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Cluster, RoleProcess
from tests.support.apps import SLEEPY_APP, write_app
from tests.support.processes import pid_from, sigterm_within, until_logged

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


async def running_nap(
    cluster: Cluster, tmp_path: Path, **executor_env: str
) -> tuple[RoleProcess, RoleProcess, dict[str, Any], int]:
    """The sleepy app's API and executor (``executor_env``) and a scheduler, with a ``nap``
    job running: (api, executor, the job, the pid of the worker process sleeping in it)."""
    env = write_app(tmp_path / "app", "sleepy", SLEEPY_APP)
    api = await cluster.start("api", app="sleepy", **env)
    executor = await cluster.start("executor", app="sleepy", **executor_env, **env)
    await cluster.start("scheduler")
    pid_file = tmp_path / "pid"
    job = await cluster.create_job(api, jobType="nap", payload={"pidFile": str(pid_file)})
    await cluster.wait_job(api, job["id"], lambda j: j["status"] == "running", 90.0)
    return api, executor, job, await pid_from(pid_file)


async def assert_handed_back(
    cluster: Cluster, api: RoleProcess, job: dict[str, Any], pid: int
) -> None:
    """The job is back to be run again (pending, and at once queued again by the running
    scheduler) with no attempt counted, and its worker process is gone."""
    handed_back = await cluster.get_job(api, job["id"])
    assert handed_back["status"] in ("pending", "queued")
    assert handed_back["attempts"] == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_example_app_runs_under_the_distributed_roles(
    cluster: Cluster, tmp_path: Path
) -> None:
    app_dir = tmp_path / "project"
    shutil.copytree(REPO / "examples", app_dir, ignore=shutil.ignore_patterns("__pycache__"))
    outbox = tmp_path / "outbox.jsonl"
    env = {"PYTHONPATH": str(app_dir), "OUTBOX": str(outbox)}
    api = await cluster.start("api", app="myjobs", **env)
    await cluster.start(
        "executor", app="myjobs:registry", JOB_TYPE="send-email,count-primes", **env
    )
    await cluster.start_all(("scheduler", {}), ("reaper", {}))

    bad = await cluster.http.post(
        f"{api.url}/jobs",
        json=cluster.job_body(jobType="send-email", payload={"to": 42, "subject": "x"}),
    )
    assert bad.status_code == 400
    assert bad.json() == {"error": "payload.to: 42 is not of type 'string'"}

    email = await cluster.create_job(
        api, jobType="send-email", payload={"to": "ada@example.com", "subject": "Hi"}
    )
    assert email["maxAttempts"] == 5  # the type's default
    nobody = await cluster.create_job(
        api, jobType="send-email", payload={"to": "x@example.invalid", "subject": "Hi"}
    )
    primes = await cluster.create_job(api, jobType="count-primes", payload={"below": 100_000})

    for job in (email, primes):
        await cluster.wait_job(api, job["id"], lambda j: j["status"] == "completed", 90.0)
    dead = await cluster.wait_job(api, nobody["id"], lambda j: j["status"] == "dlq", 90.0)
    assert dead["attempts"] == 1
    assert dead["lastError"].startswith("PermanentError: undeliverable address")
    lines = outbox.read_text().splitlines()
    assert [json.loads(line)["to"] for line in lines] == ["ada@example.com"]


async def test_sigterm_hands_a_sleeping_def_handlers_job_back_within_the_grace(
    cluster: Cluster, tmp_path: Path
) -> None:
    grace = 1.0
    api, executor, job, pid = await running_nap(
        cluster, tmp_path, JOB_TYPE="*", SHUTDOWN_GRACE=f"{grace}s"
    )
    elapsed = await sigterm_within(executor, grace + 2.0)
    print(f"distributed executor SIGTERM, SHUTDOWN_GRACE={grace}s: exit in {elapsed:.2f}s")
    await assert_handed_back(cluster, api, job, pid)


async def test_second_sigterm_stops_the_executor_within_two_seconds_handing_the_job_back(
    cluster: Cluster, tmp_path: Path
) -> None:
    api, executor, job, pid = await running_nap(
        cluster, tmp_path, JOB_TYPE="nap", SHUTDOWN_GRACE="60s"
    )
    executor.send(signal.SIGTERM)
    await until_logged(executor, "executor draining")  # the first signal is being handled
    assert executor.running()  # inside its 60 s grace

    elapsed = await sigterm_within(executor, 2.0)
    print(f"distributed executor second SIGTERM: exit in {elapsed:.2f}s")
    await assert_handed_back(cluster, api, job, pid)
