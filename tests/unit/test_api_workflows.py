"""The workflow routes through the app's test client: create (201, the 400s that store
nothing, the 409 of a taken key), read with every step, list with filters and pages, cancel
and retry; and a step's own job routes (cancel, retry) acting on its workflow."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.roles.workflows.settle import Settler
from jobscheduler.store import JobStore
from jobscheduler.store.query import JobQuery
from jobscheduler.store.workflows import WorkflowQuery

from .api_support import Api, api_deps, serve
from .conftest import BASE, DepsFactory

ETL = {
    "tenantId": "t",
    "idempotencyKey": "etl-2026-12-01",
    "steps": [
        {"name": "export", "jobType": "noop", "payload": {}},
        {"name": "transform", "jobType": "noop", "dependsOn": ["export"]},
    ],
}


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(api_deps(make_deps)) as served:
        yield served


async def post(api: Api, path: str, body: Any = None) -> Any:
    return await api.request("POST", path, **({} if body is None else {"json": body}))


async def test_a_create_answers_the_workflow_with_its_roots_pending(api: Api) -> None:
    reply = await post(api, "/workflows", ETL)
    assert reply.status == 201, reply.text
    body = reply.json
    assert body["status"] == "running"
    assert body["idempotencyKey"] == "etl-2026-12-01"
    assert [(s["name"], s["status"], s["dependsOn"]) for s in body["steps"]] == [
        ("export", "pending", []),
        ("transform", "waiting", ["export"]),
    ]
    assert all(len(s["jobId"]) == 24 for s in body["steps"])
    job = (await api.request("GET", f"/jobs/{body['steps'][1]['jobId']}")).json
    assert job["workflowId"] == body["id"]
    assert job["step"] == "transform"
    assert job["status"] == "waiting"


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"steps": [{"name": "a", "jobType": "noop", "dependsOn": ["b"]}]}, "unknown step 'b'"),
        (
            {
                "steps": [
                    {"name": "a", "jobType": "noop", "dependsOn": ["b"]},
                    {"name": "b", "jobType": "noop", "dependsOn": ["a"]},
                ]
            },
            "a cycle",
        ),
        ({"steps": [{"name": f"s{i}", "jobType": "noop"} for i in range(1001)]}, "1000"),
        ({"steps": [{"name": "a", "jobType": "nope"}]}, "unknown job type"),
    ],
)
async def test_an_invalid_workflow_is_a_400_naming_the_problem_and_stores_nothing(
    api: Api, store: JobStore, change: dict[str, Any], fragment: str
) -> None:
    reply = await post(api, "/workflows", {**ETL, **change})
    reply.assert_error(400, fragment)
    assert await store.find_workflows(WorkflowQuery(tenant_id=None), 10) == []
    assert await store.find_jobs(JobQuery(tenant_id=None), 10) == []


async def test_a_taken_key_is_a_409_naming_the_workflow(api: Api) -> None:
    first = (await post(api, "/workflows", ETL)).json
    again = await post(api, "/workflows", ETL)
    assert again.status == 409
    assert again.json["workflowId"] == first["id"]


async def test_a_workflow_is_read_with_every_step_and_its_counts(api: Api) -> None:
    created = (await post(api, "/workflows", ETL)).json
    reply = await api.request("GET", f"/workflows/{created['id']}")
    assert reply.status == 200
    assert reply.json["counts"] == {"pending": 1, "waiting": 1}
    assert reply.json["stepCount"] == 2
    assert reply.json["steps"] == created["steps"]
    (await api.request("GET", "/workflows/" + "0" * 24)).assert_error(404, "not found")
    (await api.request("GET", "/workflows/nope")).assert_error(400, "ObjectId")


async def test_the_listing_filters_by_status_and_key_and_pages_newest_first(
    api: Api, store: JobStore
) -> None:
    ids = []
    for i in range(3):
        api.deps.clock.advance(1)  # type: ignore[attr-defined]
        ids.append(
            (await post(api, "/workflows", {**ETL, "idempotencyKey": f"etl-{i}"})).json["id"]
        )
    auth = {"Authorization": f"Bearer {api.token}"}
    page = await api.client.open("/workflows?tenantId=t&limit=2", headers=auth)
    listed = await page.get_json()
    assert [w["id"] for w in listed] == [ids[2], ids[1]]
    assert "steps" not in listed[0]
    assert [w["stepCount"] for w in listed] == [2, 2]
    link = page.headers["Link"]
    next_url = link[link.index("<") + 1 : link.index(">")]
    rest = await api.request("GET", next_url)
    assert [w["id"] for w in rest.json] == [ids[0]]
    cancelled = await post(api, f"/workflows/{ids[1]}/cancel")
    assert cancelled.json["status"] == "cancelled"
    only = await api.request("GET", "/workflows?tenantId=t&status=cancelled")
    assert [w["id"] for w in only.json] == [ids[1]]
    prefixed = await api.request("GET", "/workflows?tenantId=t&idempotencyKeyPrefix=etl-2")
    assert [w["id"] for w in prefixed.json] == [ids[2]]
    (await api.request("GET", "/workflows?tenantId=t&status=creating")).assert_error(400)
    (await api.request("GET", "/workflows")).assert_error(400, "tenantId is required")
    (await api.request("GET", "/workflows?tenantId=t&color=red")).assert_error(400, "color")


async def test_every_tenants_workflows_are_listed_with_all_tenants(api: Api) -> None:
    first = (await post(api, "/workflows", ETL)).json
    other = (await post(api, "/workflows", {**ETL, "tenantId": "u"})).json
    every = await api.request("GET", "/workflows?allTenants=true")
    assert every.status == 200, every.text
    listed = {(w["id"], w["tenantId"]) for w in every.json}
    assert listed == {(first["id"], "t"), (other["id"], "u")}
    (await api.request("GET", "/workflows?allTenants=true&color=red")).assert_error(400, "color")


async def test_retry_resumes_from_the_failed_step_and_a_step_retry_does_too(
    api: Api, store: JobStore
) -> None:
    created = (await post(api, "/workflows", ETL)).json
    export, transform = (s["jobId"] for s in created["steps"])
    await store.claim_due(BASE, 10)
    await store.apply(states.pick(export, worker="w", token="t", now=BASE))
    running = await store.apply(states.start(export, token="t", now=BASE))
    assert running is not None
    dead = await store.apply(states.fail(running, token="t", now=BASE, error="x", permanent=True))
    assert dead is not None
    await Settler(api.deps, by="executor").settle([dead])  # what its executor does next
    (await post(api, f"/jobs/{export}/cancel")).assert_conflict(409, "finished job")
    (await post(api, f"/workflows/{created['id']}/cancel")).assert_conflict(409, "finished")
    failed = (await api.request("GET", f"/workflows/{created['id']}")).json
    assert failed["status"] == "failed"
    assert [s["status"] for s in failed["steps"]] == ["dlq", "cancelled"]
    retried = await post(api, f"/jobs/{export}/retry")
    assert retried.status == 200, retried.text
    assert retried.json["status"] == "pending"
    after = (await api.request("GET", f"/workflows/{created['id']}")).json
    assert after["status"] == "running"
    assert [s["status"] for s in after["steps"]] == ["pending", "waiting"]
    assert (await store.get(transform)).status is Status.WAITING
    (await post(api, f"/workflows/{created['id']}/retry")).assert_conflict(409, "no step")
    (await post(api, f"/workflows/{created['id']}/retry", {"step": "nope"})).assert_error(
        400, "no step 'nope'"
    )
