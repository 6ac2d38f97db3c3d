"""A workflow on a real ``jobscheduler dev`` survives ``kill -9``: a 100-step DAG (one root,
a fan-out of 98, a fan-in to one sink) runs while dev is killed three times and restarted on
the same SQLite file. Checked from the attempt records, not from the statuses alone: every
step completed exactly once, and no attempt of a step started before each of its parents had
finished its completed attempt."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.workflows_api import (
    assert_each_step_ran_once_after_its_parents,
    completed_histories,
    create_workflow,
    ended,
    wait_for_workflow,
)

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

    histories = await completed_histories(client, server, ids)
    assert_each_step_ran_once_after_its_parents(histories, steps)
