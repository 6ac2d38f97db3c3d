"""The user's own jobs in a real ``jobscheduler dev``: the tutorial's "Run your own jobs"
commands, time limits of every runner, and SIGTERM / double SIGTERM with a sleeping ``def``
handler (the job is handed back, never left ``running``).

Wall-clock bounds here are the contract's upper limits (SHUTDOWN_GRACE + 2 s, 2 s after a
second signal) or generous waits; nothing asserts that something is fast.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobscheduler.config import ENVIRONMENT_VARIABLES
from jobscheduler.testing import free_port
from tests.support.dev_server import DevServer
from tests.support.docblocks import copy_of_the_repo, doc_blocks, run_strict_bash
from tests.support.processes import ends_within, pid_from, sigterm_within, until_logged

from .conftest import NapRunning, wait_for_job

pytestmark = pytest.mark.e2e

Factory = Callable[..., Awaitable[DevServer]]

#: Bound on the tutorial walk-through (it starts dev, a worker process, and waits for jobs).
WALKTHROUGH_TIMEOUT = 120.0


def stored(server: DevServer, job_id: str) -> dict[str, Any]:
    with server.db() as db:
        row = db.execute(
            "SELECT status, attempts, claim_token, last_error FROM jobs WHERE id = ?", (job_id,)
        ).fetchone()
    assert row is not None
    return dict(zip(("status", "attempts", "claim_token", "last_error"), row, strict=True))


# ----------------------------------------------------------------- the tutorial walk-through


def readme_commands() -> str:
    """The walk-through: the first of the section's two ``sh`` blocks (the second, enqueue
    from code and schedules in code, is run by ``test_enqueue_from_code``)."""
    blocks = doc_blocks("docs/tutorial/index.md", "sh", "Run your own jobs")
    assert len(blocks) == 2, "the section should show two blocks of commands"
    return blocks[0]


async def test_run_your_own_jobs_readme_commands_work_from_a_copy_of_the_repo(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    copy_of_the_repo(root)
    port = free_port()
    # The exact commands, on free ports instead of 8080 and 8099 (tests run side by side).
    commands = (
        readme_commands()
        .replace("localhost:8080", f"127.0.0.1:{port}")
        .replace("8099", str(free_port()))
    )
    env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    env.update(API_PORT=str(port), METRICS_PORT=str(free_port()), LOG_LEVEL="WARNING")
    returncode, output = await run_strict_bash(
        commands, cwd=root, env=env, log_path=tmp_path / "readme.out", timeout=WALKTHROUGH_TIMEOUT
    )
    assert returncode == 0, f"tutorial commands failed ({returncode}):\n{output}"

    assert re.search(
        r"^  send-email +run_in=trio timeout=30s max_attempts=5 validate=json-schema", output, re.M
    )
    assert re.search(r"^  count-primes +run_in=process timeout=20s validate=function", output, re.M)
    assert re.search(r"^  noop +run_in=trio +\(built-in\)", output, re.M)
    assert """{"error":"payload.to: 42 is not of type 'string'"}""" in output
    outbox = (root / "examples" / "outbox.jsonl").read_text().splitlines()
    assert [json.loads(line)["to"] for line in outbox] == ["ada@example.com"]
    listed = json.loads(output.strip().splitlines()[-1])
    jobs = {job["idempotencyKey"]: job for job in listed}
    assert sorted(jobs) == ["fetch-page", "primes-2m", "welcome-ada", "welcome-nobody"]
    assert jobs["fetch-page"]["status"] == "completed"
    assert jobs["welcome-ada"]["status"] == "completed"
    assert jobs["welcome-ada"]["maxAttempts"] == 5
    assert jobs["primes-2m"]["status"] == "completed"
    assert jobs["primes-2m"]["result"] == {"below": 2000000, "primes": 148933}
    assert jobs["fetch-page"]["result"]["status"] == 200
    nobody = jobs["welcome-nobody"]
    assert (nobody["status"], nobody["attempts"]) == ("dlq", 1)
    assert nobody["lastError"] == ("PermanentError: undeliverable address 'nobody@example.invalid'")


# ----------------------------------------------------------------- time limits


@pytest.mark.parametrize("job_type", ["nap-timeout", "nap-thread-timeout", "nap-async-timeout"])
async def test_handler_past_its_timeout_fails_the_attempt_in_every_runner(
    dev_factory: Factory,
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
    sleepy_app: dict[str, str],
    tmp_path: Path,
    job_type: str,
) -> None:
    server = await dev_factory(**sleepy_app)
    pid_file = tmp_path / "pid"
    body = job_body(jobType=job_type, maxAttempts=1, payload={"pidFile": str(pid_file)})
    response = await client.post(f"{server.url}/jobs", json=body)
    assert response.status_code == 201, response.text
    dead = await wait_for_job(
        client, server, response.json()["id"], lambda j: j["status"] == "dlq", timeout=60.0
    )
    assert (dead["attempts"], dead["lastError"]) == (1, "timed out after 1s")
    if job_type == "nap-timeout":  # the worker process was killed, not left sleeping
        assert await ends_within(await pid_from(pid_file), 10.0)


# ----------------------------------------------------------------- SIGTERM


async def test_sigterm_stops_a_sleeping_def_handler_within_the_grace_and_hands_its_job_back(
    nap_running: NapRunning,
) -> None:
    grace = 1.0
    server, job_id, pid = await nap_running(SHUTDOWN_GRACE=f"{grace}s")

    elapsed = await sigterm_within(server, grace + 2.0)
    print(f"SIGTERM with a running def handler, SHUTDOWN_GRACE={grace}s: exit in {elapsed:.2f}s")
    assert stored(server, job_id) == {
        "status": "pending",
        "attempts": 0,
        "claim_token": None,
        "last_error": None,
    }
    assert await ends_within(pid, 10.0)
    assert "job handed back on shutdown" in server.log()


async def test_second_sigterm_exits_within_two_seconds_and_still_hands_the_job_back(
    nap_running: NapRunning,
) -> None:
    server, job_id, pid = await nap_running(SHUTDOWN_GRACE="60s")
    server.send(signal.SIGTERM)
    await until_logged(server, "executor draining")  # the first signal is being handled
    assert server.running()  # still inside its 60 s grace

    elapsed = await sigterm_within(server, 2.0)
    print(f"second SIGTERM with a running def handler: exit in {elapsed:.2f}s")
    assert stored(server, job_id)["status"] == "pending"
    assert stored(server, job_id)["attempts"] == 0
    assert await ends_within(pid, 10.0)
