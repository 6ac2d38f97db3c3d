"""Workflows through the roles as separate processes on MongoDB (FerretDB), Kafka and etcd:
a DAG keeps its order and runs each step once while the scheduler leader and an executor
running its steps are SIGKILLed (checked from the attempt records), and a cron template of
the built-in ``start-workflow`` type starts a workflow linked to it."""

from __future__ import annotations

import pytest
import trio

from tests.integration.conftest import Cluster
from tests.support.jobs_api import send
from tests.support.workflows_api import (
    FAST_RECOVERY,
    assert_each_step_ran_once_after_its_parents,
    create_workflow,
    ended,
    fan_dag,
    wait_for_workflow,
)

pytestmark = pytest.mark.integration

#: Fast failover and recovery, so the test sees both within seconds.
FAST = {**FAST_RECOVERY, "SCHEDULER_TICK": "200ms", "ELECTION_TTL": "3"}
FAN = 16


async def test_a_dag_runs_each_step_once_after_its_parents_across_leader_and_executor_kills(
    cluster: Cluster,
) -> None:
    api, first, second, *slow, _noop, _reaper = await cluster.start_all(
        ("api", FAST),
        ("scheduler", FAST),
        ("scheduler", FAST),
        ("executor", {**FAST, "JOB_TYPE": "slow"}),
        ("executor", {**FAST, "JOB_TYPE": "slow"}),
        ("executor", {**FAST, "JOB_TYPE": "noop"}),
        ("reaper", FAST),
    )
    leader, _ = await cluster.leader([first, second])
    steps = fan_dag(FAN, root_ms=200, middle_ms=1500, sink={"jobType": "noop"})
    body = {"tenantId": cluster.tenant, "idempotencyKey": f"dag-{cluster.suffix}", "steps": steps}
    created = await create_workflow(cluster.http, api, body)
    ids = {step["name"]: step["jobId"] for step in created["steps"]}

    # Both kills land while the middle steps run: the victim is an executor running one.
    with trio.fail_after(60):
        while not (
            running := await cluster.db(
                lambda jobs: jobs.find_one(
                    {"workflowId": created["id"], "status": "running", "jobType": "slow"}
                )
            )
        ):
            cluster.assert_alive()
            await trio.sleep(0.05)
    [victim] = [p for p in slow if p.worker_id == running["claimedBy"]]
    victim.kill()
    leader.kill()
    await cluster.start("executor", **FAST, JOB_TYPE="slow")
    await cluster.leader([s for s in (first, second) if not s.killed], timeout=30)

    final = await wait_for_workflow(cluster.http, api, created["id"], ended, timeout=180)
    assert final["status"] == "completed", final["counts"]
    assert final["counts"] == {"completed": FAN + 2}
    histories = await assert_each_step_ran_once_after_its_parents(cluster.http, api, ids, steps)
    lost = [
        name for name, history in histories.items() if any(a["outcome"] == "lost" for a in history)
    ]
    assert lost, "no step was running on the killed executor"


async def test_a_start_workflow_template_starts_a_workflow_linked_to_it(cluster: Cluster) -> None:
    api, scheduler, *_ = await cluster.start_all(
        ("api", FAST),
        ("scheduler", FAST),
        ("executor", {**FAST, "JOB_TYPE": "start-workflow"}),
        ("executor", {**FAST, "JOB_TYPE": "noop"}),
        ("reaper", FAST),
    )
    await cluster.leader([scheduler])
    steps = [{"name": "a", "jobType": "noop"}, {"name": "b", "jobType": "noop", "dependsOn": ["a"]}]
    template = await cluster.create_job(
        api,
        jobType="start-workflow",
        cron="0 2 * * *",
        scheduledAt=None,
        payload={"steps": steps},
    )
    triggered = await send(cluster.http, "POST", f"{api.url}/jobs/{template['id']}/trigger")
    assert triggered.status_code == 201, triggered.text
    run = await cluster.wait_job(
        api, triggered.json()["id"], lambda j: j["status"] == "completed", timeout=60
    )
    listed = await send(
        cluster.http,
        "GET",
        f"{api.url}/workflows",
        params={"tenantId": cluster.tenant, "templateId": template["id"]},
    )
    [started] = listed.json()
    assert started["id"] == run["result"]["workflowId"]
    assert started["fireAt"]
    done = await wait_for_workflow(cluster.http, api, started["id"], ended, timeout=60)
    assert done["status"] == "completed", done["counts"]
