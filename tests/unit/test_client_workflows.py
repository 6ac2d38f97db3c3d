"""The clients' workflow methods against the API app in process: every test body runs with the
blocking and the async client alike (each bound from the one operation table)."""

from __future__ import annotations

import pytest

from jobscheduler.errors import (
    DuplicateWorkflow,
    InvalidTransition,
    ValidationError,
    WaitTimeout,
    WorkflowNotFound,
)

from .api_support import fast_api  # noqa: F401  (registers the ``api`` fixture)
from .client_support import (
    Call,
    client_call,  # noqa: F401  (registers the ``call`` fixture)
)

STEPS = [
    {"name": "export", "jobType": "noop"},
    {"name": "transform", "jobType": "noop", "dependsOn": ["export"]},
]


async def test_a_workflow_is_created_read_listed_and_cancelled(call: Call) -> None:
    made = await call("create_workflow", STEPS, tenant_id="t", idempotency_key="etl-1")
    assert made["status"] == "running"
    assert [s["status"] for s in made["steps"]] == ["pending", "waiting"]
    got = await call("get_workflow", made["id"])
    assert got["steps"] == made["steps"]
    listed = await call("list_workflows", "t", status="running")
    assert [w["id"] for w in listed] == [made["id"]]
    pages = await call("workflow_pages", "t", page_size=1)
    assert [[w["id"] for w in page] for page in pages] == [[made["id"]], []]
    cancelled = await call("cancel_workflow", made["id"])
    assert cancelled["status"] == "cancelled"
    assert await call("wait_workflow", made["id"], timeout=1) == await call(
        "get_workflow", made["id"]
    )


async def test_waiting_for_a_running_workflow_times_out_naming_it(call: Call) -> None:
    made = await call("create_workflow", STEPS, tenant_id="t", idempotency_key="etl-wait")
    with pytest.raises(WaitTimeout, match=f"^workflow {made['id']} still running after 0s$"):
        await call("wait_workflow", made["id"], timeout=0)


async def test_the_clients_raise_the_workflow_errors(call: Call) -> None:
    made = await call("create_workflow", STEPS, tenant_id="t", idempotency_key="etl-1")
    with pytest.raises(DuplicateWorkflow) as taken:
        await call("create_workflow", STEPS, tenant_id="t", idempotency_key="etl-1")
    assert taken.value.existing_id == made["id"]
    with pytest.raises(WorkflowNotFound):
        await call("get_workflow", "0" * 24)
    with pytest.raises(ValidationError, match="unknown step"):
        await call(
            "create_workflow",
            [{"name": "a", "jobType": "noop", "dependsOn": ["b"]}],
            tenant_id="t",
            idempotency_key="etl-2",
        )
    with pytest.raises(InvalidTransition, match="no step"):
        await call("retry_workflow", made["id"])
