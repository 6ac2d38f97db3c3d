"""Tenancy on a real ``jobscheduler dev``: the AUTH=off default and its guard, keys made
with the CLI on the running server's store, revocation across processes."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import trio

from jobscheduler.testing import free_port
from tests.support.dev_server import DevServer
from tests.support.processes import CompletedCli, run_cli_in_thread

pytestmark = pytest.mark.e2e

Factory = Callable[..., Awaitable[DevServer]]
Body = Callable[..., dict[str, Any]]


async def cli(server: DevServer, *args: str) -> CompletedCli:
    return await run_cli_in_thread(*args, env={**server.env, "SQLITE_PATH": str(server.db_path)})


async def test_dev_defaults_to_auth_off_and_says_so(dev_factory: Factory, job_body: Body) -> None:
    server = await dev_factory(AUTH="")
    async with httpx.AsyncClient(timeout=10.0) as anonymous:
        created = await anonymous.post(f"{server.url}/jobs", json=job_body())
        assert created.status_code == 201, created.text
        job = await anonymous.get(f"{server.url}/jobs/{created.json()['id']}")
        assert job.status_code == 200
    assert "authentication is off" in server.log()


async def test_dev_refuses_auth_off_on_a_non_loopback_host() -> None:
    env = {k: v for k, v in os.environ.items() if k != "AUTH"}
    env.update(API_HOST="0.0.0.0", API_PORT=str(free_port()))

    result = await run_cli_in_thread("dev", env=env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "AUTH=off" in result.stderr


async def test_keys_made_with_the_cli_work_at_once_and_a_revoke_holds_within_the_ttl(
    dev_factory: Factory, job_body: Body
) -> None:
    server = await dev_factory(KEY_CACHE_TTL="1s")
    url = f"{server.url}/jobs"
    async with httpx.AsyncClient(timeout=10.0) as http:
        missing = await http.post(url, json=job_body())
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == "Bearer"
        made = await cli(server, "keys", "create", "--tenant", "tenant-e2e", "--role", "writer")
        assert made.returncode == 0, made.stderr
        key = made.stdout.strip()
        headers = {"Authorization": f"Bearer {key}"}
        created = await http.post(url, json=job_body(tenantId=None), headers=headers)
        assert created.status_code == 201, created.text
        assert created.json()["tenantId"] == "tenant-e2e"
        other = await http.post(url, json=job_body(tenantId="someone-else"), headers=headers)
        assert other.status_code == 403
        key_id = key.split("_")[1]
        revoked = await cli(server, "keys", "revoke", key_id)
        assert revoked.returncode == 0, revoked.stderr
        # Another process revoked it: this API's cache forgets it within KEY_CACHE_TTL.
        with trio.fail_after(10):
            while True:
                reply = await http.get(f"{server.url}/jobs", headers=headers)
                if reply.status_code == 401:
                    break
                assert reply.status_code == 200
                await trio.sleep(0.1)
        trail = await cli(server, "audit", "--tenant", "tenant-e2e", "--json")
        actions = [r["action"] for r in json.loads(trail.stdout)]
        assert actions.count("POST /jobs") == 2
        assert "cli keys create" in actions
        assert "cli keys revoke" in actions


async def test_huge_unicode_and_repeated_authorization_headers_are_401_not_5xx(
    dev_factory: Factory,
) -> None:
    server = await dev_factory()
    cases: list[list[tuple[str, bytes]]] = [
        [("Authorization", b"Bearer " + b"x" * 8000)],
        [("Authorization", "Bearer jsk_\u00e9\u00e9 \u2603".encode())],
        [("Authorization", b"Bearer a"), ("Authorization", b"Bearer b")],
        [("Authorization", f"Bearer {server.key}".encode()), ("Authorization", b"Basic x")],
    ]
    async with httpx.AsyncClient(timeout=10.0) as http:
        for headers in cases:
            reply = await http.get(f"{server.url}/jobs", headers=httpx.Headers(headers))
            assert reply.status_code == 401, (headers[0][1][:40], reply.text)
            assert reply.json() == {
                "error": "missing or invalid API key (send Authorization: Bearer <key>)"
            }
