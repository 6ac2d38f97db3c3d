"""Tenancy on the production roles: ``run-api`` requires keys by default, ``keys create``
works on MongoDB, and two tenants' keys see only their own jobs."""

from __future__ import annotations

import httpx
import pytest

from tests.support.processes import run_cli_in_thread

from .conftest import Cluster

pytestmark = pytest.mark.integration


async def keys_cli(cluster: Cluster, *args: str) -> str:
    result = await run_cli_in_thread("keys", *args, "--store", "mongo", env=cluster.base_env())
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


async def test_run_api_requires_keys_and_keeps_tenants_apart(cluster: Cluster) -> None:
    api = await cluster.start("api", AUTH="")  # unset: run-api's default, required
    mine = await keys_cli(cluster, "create", "--tenant", "tenant-x", "--role", "writer")
    theirs = await keys_cli(cluster, "create", "--tenant", "tenant-y", "--role", "writer")
    async with httpx.AsyncClient(timeout=10.0) as http:
        anonymous = await http.get(f"{api.url}/jobs", params={"tenantId": "tenant-x"})
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"] == "Bearer"
        body = cluster.job_body(tenantId=None, idempotencyKey="same-key")
        created = await http.post(
            f"{api.url}/jobs", json=body, headers={"Authorization": f"Bearer {mine}"}
        )
        assert created.status_code == 201, created.text
        job = created.json()
        assert job["tenantId"] == "tenant-x"
        # The other tenant: the same idempotency key is no conflict, the job is a 404.
        other = await http.post(
            f"{api.url}/jobs", json=body, headers={"Authorization": f"Bearer {theirs}"}
        )
        assert other.status_code == 201, other.text
        seen = await http.get(
            f"{api.url}/jobs/{job['id']}", headers={"Authorization": f"Bearer {theirs}"}
        )
        assert seen.status_code == 404
        assert seen.json() == {"error": f"job {job['id']} not found"}
    trail = await cluster.http.get(f"{api.url}/audit", params={"tenantId": "tenant-x"})
    records = [(r["action"], r["status"]) for r in reversed(trail.json()["records"])]
    assert records == [("cli keys create", 201), ("POST /jobs", 201)]
