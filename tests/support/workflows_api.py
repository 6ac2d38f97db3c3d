"""Workflows over the HTTP API in tests: create one (503s retried with the same key, a 409
of its own key read back) and wait until it reaches a state."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import trio

from tests.support.jobs_api import Api, send


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
    """Poll ``GET /workflows/{id}`` until ``predicate(workflow)``; fail with the last state."""
    last: dict[str, Any] = {}
    try:
        with trio.fail_after(timeout):
            while True:
                response = await send(http, "GET", f"{api.url}/workflows/{workflow_id}")
                assert response.status_code == 200, response.text
                last = response.json()
                if predicate(last):
                    return last
                await trio.sleep(interval)
    except trio.TooSlowError:
        summary = {k: v for k, v in last.items() if k != "steps"}
        raise AssertionError(
            f"workflow {workflow_id} never satisfied the condition within {timeout}s; "
            f"last state: {json.dumps(summary)}"
        ) from None


def ended(workflow: dict[str, Any]) -> bool:
    """True once ``workflow`` is completed, failed or cancelled."""
    return workflow["status"] in ("completed", "failed", "cancelled")
