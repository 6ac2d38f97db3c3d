"""The management routes under tenancy (``AUTH=required``): roles, the tenant a
bulk action or ``GET /stats`` acts on, 404 for another tenant's job or template, the audit
records of actions, and a trigger's run identified by (template, fire time)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobscheduler.domain.model import new_job_id

from .conftest import BASE, DepsFactory
from .tenancy_support import AuthApi, auth_deps, serve_auth


def body(tenant: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "idempotencyKey": f"k-{new_job_id()}",
        "tenantId": tenant,
        "jobType": "noop",
        "scheduledAt": "2030-01-01T00:00:00Z",
    }
    out.update(fields)
    if "cron" in fields:
        del out["scheduledAt"]
    return out


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[AuthApi]:
    async with serve_auth(auth_deps(make_deps)) as served:
        yield served


async def create(api: AuthApi, tenant: str, **fields: Any) -> dict[str, Any]:
    reply = await api.call("POST", "/jobs", as_="admin", json=body(tenant, **fields))
    assert reply.status == 201, reply.text
    created: dict[str, Any] = reply.json
    return created


async def status_of(api: AuthApi, job_id: str) -> str:
    reply = await api.call("GET", f"/jobs/{job_id}", as_="admin")
    return str(reply.json["status"])


async def test_a_tenant_bound_bulk_cancel_acts_on_its_own_tenant_only(api: AuthApi) -> None:
    mine = await create(api, "tenant-a")
    theirs = await create(api, "tenant-b")
    reply = await api.call("POST", "/jobs/cancel", as_="a-writer", json={"filter": {}})
    assert (reply.status, reply.json["matched"], reply.json["changed"]) == (200, 1, 1)
    assert await status_of(api, mine["id"]) == "cancelled"
    assert await status_of(api, theirs["id"]) == "pending"
    named = {"filter": {"tenantId": "tenant-b"}}
    assert (await api.call("POST", "/jobs/cancel", as_="a-admin", json=named)).status == 403
    assert (await api.call("POST", "/jobs/retry", as_="a-writer", json=named)).status == 403
    assert await status_of(api, theirs["id"]) == "pending"


async def test_an_all_tenant_admin_names_the_tenant_or_acts_on_every_tenant(
    api: AuthApi,
) -> None:
    a = await create(api, "tenant-a")
    b = await create(api, "tenant-b")
    named = {"filter": {"tenantId": "tenant-b"}}
    reply = await api.call("POST", "/jobs/cancel", as_="admin", json=named)
    assert reply.json["changed"] == 1
    assert (await status_of(api, a["id"]), await status_of(api, b["id"])) == (
        "pending",
        "cancelled",
    )
    everything = await api.call("POST", "/jobs/cancel", as_="admin", json={"filter": {}})
    assert everything.json["changed"] == 1
    assert await status_of(api, a["id"]) == "cancelled"


async def test_bulk_and_single_actions_need_a_writer(api: AuthApi) -> None:
    job = await create(api, "tenant-a")
    for path, payload in (
        ("/jobs/cancel", {"filter": {}}),
        ("/jobs/retry", {"filter": {}}),
        (f"/jobs/{job['id']}/cancel", None),
    ):
        reply = await api.call("POST", path, as_="a-reader", json=payload)
        assert reply.status == 403, path
    assert await status_of(api, job["id"]) == "pending"


async def test_another_tenants_job_is_404_for_every_single_job_action(api: AuthApi) -> None:
    job = await create(api, "tenant-b")
    template = await create(api, "tenant-b", cron="*/5 * * * *")
    for action, target in (
        ("cancel", job),
        ("retry", job),
        ("pause", template),
        ("resume", template),
        ("trigger", template),
    ):
        theirs = await api.call("POST", f"/jobs/{target['id']}/{action}", as_="a-admin")
        missing = await api.call("POST", f"/jobs/{new_job_id()}/{action}", as_="a-admin")
        assert (theirs.status, missing.status) == (404, 404), action
    patch = await api.call("PATCH", f"/jobs/{template['id']}", as_="a-admin", json={"priority": 3})
    delete = await api.call("DELETE", f"/jobs/{template['id']}", as_="a-admin")
    assert (patch.status, delete.status) == (404, 404)
    assert await status_of(api, template["id"]) == "pending"


async def test_listing_another_tenants_template_runs_is_404_like_a_missing_template(
    api: AuthApi,
) -> None:
    theirs = await create(api, "tenant-b", cron="*/5 * * * *")
    mine = await create(api, "tenant-a", cron="*/5 * * * *")
    foreign = await api.call("GET", f"/jobs?templateId={theirs['id']}", as_="a-reader")
    missing = await api.call("GET", f"/jobs?templateId={new_job_id()}", as_="a-reader")
    assert (foreign.status, missing.status) == (404, 404)
    assert foreign.json["error"].replace(theirs["id"], "<id>") == missing.json["error"].replace(
        missing.json["error"].split()[1], "<id>"
    )
    own = await api.call("GET", f"/jobs?templateId={mine['id']}", as_="a-reader")
    assert (own.status, own.json) == (200, [])


async def test_listing_defaults_to_the_keys_tenant_and_refuses_another(api: AuthApi) -> None:
    mine = await create(api, "tenant-a")
    await create(api, "tenant-b")
    listed = await api.call("GET", "/jobs", as_="a-reader")
    assert [j["id"] for j in listed.json] == [mine["id"]]
    assert (await api.call("GET", "/jobs?tenantId=tenant-b", as_="a-reader")).status == 403


async def test_stats_count_the_keys_tenant_or_every_tenant_for_an_all_tenant_admin(
    api: AuthApi,
) -> None:
    await create(api, "tenant-a")
    await create(api, "tenant-b")
    await create(api, "tenant-b")
    mine = await api.call("GET", "/stats", as_="a-reader")
    assert (mine.json["tenantId"], mine.json["byStatus"]) == ("tenant-a", {"pending": 1})
    assert (await api.call("GET", "/stats?tenantId=tenant-b", as_="a-reader")).status == 403
    every = await api.call("GET", "/stats", as_="admin")
    assert (every.json["tenantId"], every.json["byStatus"]) == (None, {"pending": 3})


async def test_a_cancel_and_a_bulk_retry_write_audit_records(api: AuthApi) -> None:
    job = await create(api, "tenant-a")
    cancelled = await api.call("POST", f"/jobs/{job['id']}/cancel", as_="a-writer")
    retried = await api.call(
        "POST", "/jobs/retry", as_="a-writer", json={"filter": {"status": "cancelled"}}
    )
    assert (cancelled.status, retried.status, retried.json["changed"]) == (200, 200, 1)
    trail = await api.call("GET", "/audit?tenantId=tenant-a", as_="admin")
    rows = [
        (r["action"], r["keyId"], r["status"], r["jobId"], r["detail"])
        for r in reversed(trail.json["records"])
        if r["action"] != "POST /jobs"
    ]
    writer = api.key_ids["a-writer"]
    assert rows == [
        ("POST /jobs/<job_id>/cancel", writer, 200, job["id"], None),
        ("POST /jobs/retry", writer, 200, None, "tenant tenant-a: 1 matched, 1 changed"),
    ]


async def test_a_second_trigger_at_the_same_fire_time_is_a_409_naming_the_run(
    api: AuthApi,
) -> None:
    template = await create(api, "tenant-a", cron="*/5 * * * *")
    first = await api.call("POST", f"/jobs/{template['id']}/trigger", as_="a-writer")
    again = await api.call("POST", f"/jobs/{template['id']}/trigger", as_="a-writer")
    assert first.status == 201
    assert (again.status, again.json["jobId"]) == (409, first.json["id"])


async def test_a_trigger_whose_run_key_another_job_holds_still_spawns_the_run(
    api: AuthApi,
) -> None:
    template = await create(api, "tenant-a", cron="*/5 * * * *", idempotencyKey="tpl")
    nanos = int(BASE.timestamp()) * 1_000_000_000
    holder = await create(api, "tenant-a", idempotencyKey=f"tpl-run-{nanos}")
    run = await api.call("POST", f"/jobs/{template['id']}/trigger", as_="a-writer")
    assert run.status == 201, run.text
    assert run.json["templateId"] == template["id"]
    assert run.json["id"] != holder["id"]
    assert run.json["idempotencyKey"] == f"tpl-run-{nanos}-{run.json['id']}"
