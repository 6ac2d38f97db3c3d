"""A workflow on a real ``jobscheduler dev`` survives ``kill -9``: a 100-step DAG (one root,
a fan-out of 98, a fan-in to one sink) runs while dev is killed three times and restarted on
the same SQLite file. Checked from the attempt records, not from the statuses alone: every
step completed exactly once, and no attempt of a step started before each of its parents had
finished its completed attempt."""

from __future__ import annotations

import httpx
import pytest

from tests.support.workflows_api import (
    FAST_RECOVERY,
    assert_each_step_ran_once_after_its_parents,
    create_workflow,
    ended,
    fan_dag,
    wait_for_workflow,
)

from .dashboard_steps import TENANT, DevFactory

pytestmark = pytest.mark.e2e

FAN = 98


async def test_a_dag_completes_each_step_once_after_its_parents_across_three_kill_9s(
    dev_factory: DevFactory, client: httpx.AsyncClient
) -> None:
    server = await dev_factory(**FAST_RECOVERY)
    steps = fan_dag(
        FAN, root_ms=300, middle_ms=1000, sink={"jobType": "slow", "payload": {"sleepMs": 100}}
    )
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
        server = await dev_factory(SQLITE_PATH=str(server.db_path), **FAST_RECOVERY)
    final = await wait_for_workflow(client, server, created["id"], ended, timeout=120)
    assert final["status"] == "completed", final["counts"]
    assert final["counts"] == {"completed": FAN + 2}

    await assert_each_step_ran_once_after_its_parents(client, server, ids, steps)
