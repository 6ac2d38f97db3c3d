"""Workflows over the HTTP API in tests: create one (503s retried with the same key, a 409
of its own key read back), wait until it reaches a state, and check from the steps' attempt
records that each ran once, after its parents (the crash tests)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import httpx
import trio

from tests.support.jobs_api import Api, send, wait_for_state

#: Role settings of the crash tests: a killed process's running steps are taken back within
#: seconds.
FAST_RECOVERY = {
    "CLAIM_TIMEOUT": "2s",
    "HEARTBEAT_INTERVAL": "500ms",
    "REAPER_INTERVAL": "200ms",
    "QUEUED_TIMEOUT": "2s",
}


def fan_dag(
    fan: int, *, root_ms: int, middle_ms: int, sink: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """A DAG of ``slow`` steps: a root (``root_ms``), ``fan`` steps after it
    (``middle_ms`` each), and the ``sink`` step (its body) after all of those."""
    middle = [f"part-{i:02d}" for i in range(fan)]
    return [
        {"name": "root", "jobType": "slow", "payload": {"sleepMs": root_ms}},
        *(
            {
                "name": name,
                "jobType": "slow",
                "payload": {"sleepMs": middle_ms},
                "dependsOn": ["root"],
            }
            for name in middle
        ),
        {"name": "sink", **sink, "dependsOn": middle},
    ]


async def create_workflow(
    http: httpx.AsyncClient, api: Api, body: dict[str, Any]
) -> dict[str, Any]:
    """``POST /workflows`` with ``body``; the stored workflow with its steps."""
    response = await send(http, "POST", f"{api.url}/workflows", json=body)
    if response.status_code == 409 and "workflowId" in response.json():
        response = await send(http, "GET", f"{api.url}/workflows/{response.json()['workflowId']}")
        assert response.status_code == 200, response.text
        stored: dict[str, Any] = response.json()
        return stored
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def wait_for_workflow(
    http: httpx.AsyncClient,
    api: Api,
    workflow_id: str,
    predicate: Callable[[dict[str, Any]], bool],
    timeout: float = 30.0,
    interval: float = 0.1,
) -> dict[str, Any]:
    """Poll ``GET /workflows/{id}`` until ``predicate(workflow)``; fail with the last state
    (without its steps)."""
    return await wait_for_state(
        http,
        f"{api.url}/workflows/{workflow_id}",
        predicate,
        what=f"workflow {workflow_id}",
        timeout=timeout,
        interval=interval,
        shown=lambda last: {k: v for k, v in last.items() if k != "steps"},
    )


def ended(workflow: dict[str, Any]) -> bool:
    """True once ``workflow`` is completed, failed or cancelled."""
    return workflow["status"] in ("completed", "failed", "cancelled")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def completed_histories(
    http: httpx.AsyncClient, api: Api, ids: Mapping[str, str], timeout: float = 10.0
) -> dict[str, list[dict[str, Any]]]:
    """Each step's attempt records (``ids``: step name -> job id), read once every step's
    completed attempt is recorded: on MongoDB an outcome's record is written just after the
    outcome (no transactions), so it may show up a moment after the status does."""
    histories: dict[str, list[dict[str, Any]]] = {}
    with trio.move_on_after(timeout):
        while True:
            for name, job_id in ids.items():
                reply = await send(http, "GET", f"{api.url}/jobs/{job_id}/attempts")
                assert reply.status_code == 200, reply.text
                histories[name] = reply.json()["attempts"]
            if all(any(a["outcome"] == "completed" for a in h) for h in histories.values()):
                break
            await trio.sleep(0.2)
    return histories


async def assert_each_step_ran_once_after_its_parents(
    http: httpx.AsyncClient, api: Api, ids: Mapping[str, str], steps: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """From the attempt records of the ``steps`` (``ids``: name -> job id): every step
    completed exactly once, and no attempt of a step started before each of its parents had
    finished its completed attempt. Returns the records, by step name."""
    histories = await completed_histories(http, api, ids)
    finished: dict[str, datetime] = {}
    for name, history in histories.items():
        completed = [a for a in history if a["outcome"] == "completed"]
        assert len(completed) == 1, (name, history)
        finished[name] = at(completed[0]["finishedAt"])
    parents = {step["name"]: step.get("dependsOn", []) for step in steps}
    for name, history in histories.items():
        for record in history:
            if record.get("startedAt") is None:
                continue  # lost while only claimed: it never ran
            started = at(record["startedAt"])
            early = [p for p in parents[name] if started < finished[p]]
            assert not early, f"{name} attempt {record} started before {early} finished"
    return histories
