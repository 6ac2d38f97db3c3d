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
import textwrap
import time
from pathlib import Path

import pytest
import trio

from tests.integration.conftest import Cluster, RoleProcess

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

SLEEPY_APP = """
    import os
    import time
    from pathlib import Path

    from jobscheduler.handlers import HandlerRegistry

    registry = HandlerRegistry()


    @registry.handler("nap")
    def nap(ctx):
        Path(ctx.payload["pidFile"]).write_text(str(os.getpid()))
        time.sleep(600)
"""


async def start_with_app(cluster: Cluster, role: str, app: str, **env: str) -> RoleProcess:
    """Start ``run-<role> --app <app>`` and wait until it is ready."""
    process = cluster.prepare(role, **env)
    process.args = ["--app", app]
    process.spawn()
    await process.wait_ready(cluster.http)
    return process


async def test_example_app_runs_under_the_distributed_roles(
    cluster: Cluster, tmp_path: Path
) -> None:
    app_dir = tmp_path / "project"
    shutil.copytree(REPO / "examples", app_dir, ignore=shutil.ignore_patterns("__pycache__"))
    outbox = tmp_path / "outbox.jsonl"
    env = {"PYTHONPATH": str(app_dir), "OUTBOX": str(outbox)}
    api = await start_with_app(cluster, "api", "myjobs", **env)
    await start_with_app(
        cluster, "executor", "myjobs:registry", JOB_TYPE="send-email,count-primes", **env
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
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "sleepy.py").write_text(textwrap.dedent(SLEEPY_APP))
    env = {"PYTHONPATH": str(app_dir)}
    grace = 1.0
    api = await start_with_app(cluster, "api", "sleepy", **env)
    executor = await start_with_app(
        cluster, "executor", "sleepy", JOB_TYPE="*", SHUTDOWN_GRACE=f"{grace}s", **env
    )
    await cluster.start("scheduler")
    pid_file = tmp_path / "pid"
    job = await cluster.create_job(api, jobType="nap", payload={"pidFile": str(pid_file)})
    await cluster.wait_job(api, job["id"], lambda j: j["status"] == "running", 90.0)
    with trio.fail_after(30):
        while not pid_file.exists() or not pid_file.read_text():
            await trio.sleep(0.05)
    pid = int(pid_file.read_text())

    started = time.monotonic()
    code = await executor.stop(signal.SIGTERM, timeout=grace + 2.0)
    elapsed = time.monotonic() - started
    print(f"distributed executor SIGTERM, SHUTDOWN_GRACE={grace}s: exit in {elapsed:.2f}s")

    assert code == 0, executor.tail()
    handed_back = await cluster.get_job(api, job["id"])
    # Handed back: pending, and at once queued again by the running scheduler.
    assert handed_back["status"] in ("pending", "queued")
    assert handed_back["attempts"] == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_second_sigterm_stops_the_executor_within_two_seconds_handing_the_job_back(
    cluster: Cluster, tmp_path: Path
) -> None:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "sleepy.py").write_text(textwrap.dedent(SLEEPY_APP))
    env = {"PYTHONPATH": str(app_dir)}
    api = await start_with_app(cluster, "api", "sleepy", **env)
    executor = await start_with_app(
        cluster, "executor", "sleepy", JOB_TYPE="nap", SHUTDOWN_GRACE="60s", **env
    )
    await cluster.start("scheduler")
    pid_file = tmp_path / "pid"
    job = await cluster.create_job(api, jobType="nap", payload={"pidFile": str(pid_file)})
    await cluster.wait_job(api, job["id"], lambda j: j["status"] == "running", 90.0)
    with trio.fail_after(30):
        while not pid_file.exists() or not pid_file.read_text():
            await trio.sleep(0.05)
    pid = int(pid_file.read_text())
    executor.send(signal.SIGTERM)
    with trio.fail_after(10):  # the first signal is being handled: the executor drains
        while "executor draining" not in executor.log():
            await trio.sleep(0.02)
    assert executor.running()  # inside its 60 s grace

    started = time.monotonic()
    assert executor.proc is not None
    executor.proc.send_signal(signal.SIGTERM)
    code = await executor.stop(signal.SIGTERM, timeout=2.0)
    elapsed = time.monotonic() - started
    print(f"distributed executor second SIGTERM: exit in {elapsed:.2f}s")

    assert code == 0, executor.tail()
    handed_back = await cluster.get_job(api, job["id"])
    assert handed_back["status"] in ("pending", "queued")
    assert handed_back["attempts"] == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
