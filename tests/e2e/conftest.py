"""A real ``jobscheduler dev`` subprocess per test, driven over HTTP."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from jobscheduler.config import ENVIRONMENT_VARIABLES
from jobscheduler.testing import stop_all
from tests.support.apps import SLEEPY_APP, write_app
from tests.support.dev_server import DevServer
from tests.support.jobs_api import create_job
from tests.support.jobs_api import wait_for_job as wait_for_job
from tests.support.processes import pid_from


@pytest.fixture
async def dev_factory(
    tmp_path: Path, client: httpx.AsyncClient
) -> AsyncIterator[Callable[..., Awaitable[DevServer]]]:
    """``await dev_factory(ENV=...)`` starts a dev server; all are stopped (SIGTERM) after
    the test, and each must exit 0 — a clean shutdown is part of every e2e test (one the
    test SIGKILLed is exempt, one that exited unasked is a failure). With
    ``AUTH=required`` (the default here) the ``client`` fixture sends the server's key."""
    servers: list[DevServer] = []

    async def start(*, argv: list[str] | None = None, **env: str) -> DevServer:
        server = DevServer(tmp_path, env, argv)
        servers.append(server)
        await server.start()
        client.headers.update(server.auth_headers)
        return server

    yield start
    problems = await stop_all(servers)
    tails = "\n\n".join(server.tail() for server in servers)
    assert not problems, "dev did not stop cleanly: " + "; ".join(problems) + "\n" + tails


@pytest.fixture(scope="module")
def live_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """One dev server shared by a module's synchronous tests (clients, CLI, fuzzing); it must
    stop cleanly (exit 0) and log no traceback."""
    server = DevServer(Path(tmp_path_factory.mktemp("live")), {"LOG_LEVEL": "INFO"})
    trio.run(server.start)
    yield server
    code = trio.run(server.stop)
    assert code == 0, f"dev exited {code}:\n{server.log()[-4000:]}"
    assert "Traceback" not in server.log(), server.log()[-4000:]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10.0) as http:
        yield http


@pytest.fixture
def job_body() -> Callable[..., dict[str, Any]]:
    counter = iter(range(1_000_000))

    def make(**fields: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "idempotencyKey": f"e2e-{time.time_ns()}-{next(counter)}",
            "tenantId": "tenant-e2e",
            "jobType": "noop",
            "scheduledAt": "2020-01-01T00:00:00Z",
        }
        body.update(fields)
        return body

    return make


@pytest.fixture
def sleepy_app(tmp_path: Path) -> dict[str, str]:
    """Environment for a dev server that loads SLEEPY_APP (tests/support/apps.py) through
    JOBSCHEDULER_APP."""
    return {"JOBSCHEDULER_APP": "sleepy", **write_app(tmp_path / "app", "sleepy", SLEEPY_APP)}


#: ``await nap_running(ENV=...)`` (the fixture below).
NapRunning = Callable[..., Awaitable[tuple[DevServer, str, int]]]


@pytest.fixture
def nap_running(
    dev_factory: Callable[..., Awaitable[DevServer]],
    client: httpx.AsyncClient,
    job_body: Callable[..., dict[str, Any]],
    sleepy_app: dict[str, str],
    tmp_path: Path,
) -> NapRunning:
    """``await nap_running(ENV=...)``: a dev server of the sleepy app with ``ENV`` and a
    ``nap`` job running in a worker process: (the server, the job's id, the worker's pid)."""

    async def start(**env: str) -> tuple[DevServer, str, int]:
        server = await dev_factory(**env, **sleepy_app)
        pid_file = tmp_path / "nap.pid"
        body = job_body(jobType="nap", payload={"pidFile": str(pid_file)})
        job_id: str = (await create_job(client, server, body))["id"]
        pid = await pid_from(pid_file)
        await wait_for_job(client, server, job_id, lambda j: j["status"] == "running")
        return server, job_id, pid

    return start


def readme_env(server: DevServer) -> dict[str, str]:
    """The environment of a user who pasted the README's commands against ``server``."""
    env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    return env | {"JOBSCHEDULER_URL": server.url, "JOBSCHEDULER_API_KEY": server.key or ""}
