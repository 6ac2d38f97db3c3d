"""A workflow on a real ``jobscheduler dev`` survives ``kill -9``: a 100-step DAG (one root,
a fan-out of 98, a fan-in to one sink) runs while dev is killed three times and restarted on
the same SQLite file. Checked from the attempt records, not from the statuses alone: every
step completed exactly once, and no attempt of a step started before each of its parents had
finished its completed attempt."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.support.dev_server import DevServer
from tests.support.jobs_api import send
from tests.support.workflows_api import create_workflow, ended, wait_for_workflow

from .dashboard_steps import TENANT, DevFactory

pytestmark = pytest.mark.e2e

#: Fast recovery, so a killed dev's running steps are taken back within seconds.
RECOVERY = {
    "CLAIM_TIMEOUT": "2s",
    "HEARTBEAT_INTERVAL": "500ms",
    "REAPER_INTERVAL": "200ms",
    "QUEUED_TIMEOUT": "2s",
}
FAN = 98


def dag() -> list[dict[str, Any]]:
    middle = [f"part-{i:02d}" for i in range(FAN)]
    return [
        {"name": "root", "jobType": "slow", "payload": {"sleepMs": 300}},
        *(
            {"name": name, "jobType": "slow", "payload": {"sleepMs": 1000}, "dependsOn": ["root"]}
            for name in middle
        ),
        {"name": "sink", "jobType": "slow", "payload": {"sleepMs": 100}, "dependsOn": middle},
    ]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def attempts(http: httpx.AsyncClient, server: DevServer, job_id: str) -> list[Any]:
    reply = await send(http, "GET", f"{server.url}/jobs/{job_id}/attempts")
    assert reply.status_code == 200, reply.text
    records: list[Any] = reply.json()["attempts"]
    return records


async def test_a_dag_completes_each_step_once_after_its_parents_across_three_kill_9s(
    dev_factory: DevFactory, client: httpx.AsyncClient
) -> None:
    server = await dev_factory(**RECOVERY)
    steps = dag()
    created = await create_workflow(
        client, server, {"tenantId": TENANT, "idempotencyKey": "crash-dag", "steps": steps}
    )
    ids = {step["name"]: step["jobId"] for step in created["steps"]}
    # Killed once the root has completed, then again a third and two thirds of the way.
    for threshold in (1, 33, 66):
        progress = await wait_for_workflow(
            client,
            server,
            created["id"],
            lambda w, n=threshold: w["counts"].get("completed", 0) >= n,
            interval=0.05,
        )
        # Every kill lands while the workflow runs.
        assert progress["counts"].get("completed", 0) < FAN + 2, progress["counts"]
        server.kill()
        server = await dev_factory(SQLITE_PATH=str(server.db_path), **RECOVERY)
    final = await wait_for_workflow(client, server, created["id"], ended, timeout=120)
    assert final["status"] == "completed", final["counts"]
    assert final["counts"] == {"completed": FAN + 2}

    records = {name: await attempts(client, server, job_id) for name, job_id in ids.items()}
    finished: dict[str, datetime] = {}
    for name, history in records.items():
        completed = [a for a in history if a["outcome"] == "completed"]
        assert len(completed) == 1, (name, history)
        finished[name] = at(completed[0]["finishedAt"])
    parents = {step["name"]: step.get("dependsOn", []) for step in steps}
    for name, history in records.items():
        for record in history:
            started = at(record["startedAt"])
            early = [p for p in parents[name] if started < finished[p]]
            assert not early, f"{name} attempt {record} started before {early} finished"
