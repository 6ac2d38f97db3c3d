"""The clients' workflow methods against the API app in process: every test body runs with the
blocking and the async client alike (each bound from the one operation table)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import trio

from jobscheduler.client import AsyncClient, Client
from jobscheduler.errors import (
    DuplicateWorkflow,
    InvalidTransition,
    ValidationError,
    WorkflowNotFound,
)

from .api_support import Api, api_deps, serve
from .conftest import DepsFactory
from .test_client_listing import URL, ThreadToTrio

STEPS = [
    {"name": "export", "jobType": "noop"},
    {"name": "transform", "jobType": "noop", "dependsOn": ["export"]},
]

Call = Callable[..., Any]


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(api_deps(make_deps)) as served:
        yield served


@pytest.fixture(params=["sync", "async"])
def call(request: pytest.FixtureRequest, api: Api) -> Call:
    """``await call("method", *args, **kwargs)`` on a fresh Client or AsyncClient; a
    listing answers a list."""
    asgi = httpx.ASGITransport(app=api.client.app)

    async def with_async(method: str, *args: Any, **kwargs: Any) -> Any:
        async with AsyncClient(URL, api_key=api.token, transport=asgi) as client:
            result = getattr(client, method)(*args, **kwargs)
            if inspect.isasyncgen(result):
                return [item async for item in result]
            return await result

    def blocking(method: str, *args: Any, **kwargs: Any) -> Any:
        with Client(URL, api_key=api.token, transport=ThreadToTrio(asgi)) as client:
            result = getattr(client, method)(*args, **kwargs)
            return list(result) if inspect.isgenerator(result) else result

    async def with_sync(method: str, *args: Any, **kwargs: Any) -> Any:
        return await trio.to_thread.run_sync(lambda: blocking(method, *args, **kwargs))

    return with_async if request.param == "async" else with_sync


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
