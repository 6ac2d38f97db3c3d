"""API keys and the audit trail through the HTTP API (``AUTH=required``): making, rotating
and listing keys, who may, and the audit record of every state-changing request."""

from __future__ import annotations

from typing import Any

import pytest

from jobscheduler.config import Settings
from jobscheduler.observability.metrics import Metrics
from jobscheduler.process.assembly import production_store
from jobscheduler.store.mongo import MongoJobStore
from jobscheduler.store.sqlite import SQLiteJobStore

from .conftest import DepsFactory
from .tenancy_support import (
    AuthApi,
    auth_api,  # noqa: F401  (registers the ``api`` fixture)
    auth_deps,
    body,
    serve_auth,
)

# ----------------------------------------------------------------------- keys


async def test_key_rotation_new_key_works_at_once_and_the_old_one_stops(api: AuthApi) -> None:
    old = api.tokens["a-writer"]
    assert (await api.call("POST", "/jobs", as_="a-writer", json=body())).status == 201
    made = await api.call(
        "POST", "/keys", as_="a-admin", json={"role": "writer", "name": "rotated"}
    )
    assert made.status == 201
    assert made.json["tenantId"] == "tenant-a"
    new = made.json["key"]
    revoked = await api.call("DELETE", f"/keys/{api.key_ids['a-writer']}", as_="a-admin")
    assert revoked.status == 200
    assert revoked.json["revoked"] is True
    with_old = await api.call("POST", "/jobs", headers={"Authorization": f"Bearer {old}"})
    assert with_old.status == 401
    with_new = await api.call(
        "POST", "/jobs", headers={"Authorization": f"Bearer {new}"}, json=body()
    )
    assert with_new.status == 201


async def test_key_listing_never_shows_secrets_or_other_tenants(api: AuthApi) -> None:
    reply = await api.call("GET", "/keys", as_="a-admin")
    assert reply.status == 200
    assert {k["tenantId"] for k in reply.json} == {"tenant-a"}
    for token in api.tokens.values():
        assert token.split("_", 2)[2] not in reply.text
    everyone = await api.call("GET", "/keys", as_="admin")
    assert len(everyone.json) == len(api.tokens)


async def test_a_tenant_admin_cannot_make_all_tenant_or_foreign_keys(api: AuthApi) -> None:
    all_tenants = await api.call(
        "POST", "/keys", as_="a-admin", json={"allTenants": True, "role": "admin"}
    )
    foreign = await api.call(
        "POST", "/keys", as_="a-admin", json={"tenantId": "tenant-b", "role": "writer"}
    )
    revoke_foreign = await api.call("DELETE", f"/keys/{api.key_ids['b-writer']}", as_="a-admin")
    assert (all_tenants.status, foreign.status, revoke_foreign.status) == (403, 403, 404)
    assert (await api.call("GET", "/jobs", as_="b-writer")).status == 200


@pytest.mark.parametrize(
    "payload",
    [
        {"role": "root"},
        {"role": "reader", "allTenants": True},
        {"role": "writer", "name": "\x00"},
        {"role": "writer", "unknown": 1},
        {"role": "writer", "tenantId": 5},
        [],
    ],
)
async def test_bad_key_requests_are_400(api: AuthApi, payload: Any) -> None:
    reply = await api.call("POST", "/keys", as_="admin", json=payload)
    assert reply.status == 400, reply.text
    assert list(reply.json) == ["error"]


async def test_keys_and_audit_are_admin_only(api: AuthApi) -> None:
    for method, path in (("GET", "/keys"), ("POST", "/keys"), ("GET", "/audit")):
        assert (await api.call(method, path, as_="a-writer", json={})).status == 403


# ----------------------------------------------------------------------- audit


async def test_every_state_changing_request_is_audited(api: AuthApi) -> None:
    created = await api.call("POST", "/jobs", as_="a-writer", json=body())
    bad = await api.call("POST", "/jobs", as_="a-writer", json={"nope": 1})
    forbidden = await api.call("POST", "/jobs", as_="a-reader", json=body())
    made = await api.call("POST", "/keys", as_="a-admin", json={"role": "reader"})
    revoked = await api.call("DELETE", f"/keys/{made.json['id']}", as_="a-admin")
    await api.call("GET", "/jobs", as_="a-reader")  # reads are not audited
    await api.call("POST", "/jobs")  # nor requests without a valid key
    trail = await api.call("GET", "/audit?tenantId=tenant-a", as_="admin")
    assert trail.status == 200
    rows = [
        (r["action"], r["keyId"], r["status"], r["jobId"]) for r in reversed(trail.json["records"])
    ]
    assert rows == [
        ("POST /jobs", api.key_ids["a-writer"], 201, created.json["id"]),
        ("POST /jobs", api.key_ids["a-writer"], bad.status, None),
        ("POST /jobs", api.key_ids["a-reader"], forbidden.status, None),
        ("POST /keys", api.key_ids["a-admin"], 201, None),
        ("DELETE /keys/<key_id>", api.key_ids["a-admin"], revoked.status, None),
    ]
    details = [r["detail"] for r in reversed(trail.json["records"])]
    assert details[3] == f"key {made.json['id']} created (reader)"
    assert details[4] == f"key {made.json['id']} revoked"
    assert all(r["tenantId"] == "tenant-a" for r in trail.json["records"])


async def test_a_create_and_its_audit_record_are_one_store_write(
    make_deps: DepsFactory, sqlite_store: SQLiteJobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On SQLite: what is counted is its writer's transactions.
    writes: list[int] = []
    write = sqlite_store._write

    async def counted(op: Any) -> Any:
        writes.append(1)
        return await write(op)

    on_sqlite = DepsFactory(settings=make_deps.settings, store=sqlite_store)
    async with serve_auth(auth_deps(on_sqlite)) as api:
        monkeypatch.setattr(sqlite_store, "_write", counted)
        created = await api.call("POST", "/jobs", as_="a-writer", json=body(idempotencyKey="once"))
        assert (created.status, len(writes)) == (201, 1)  # the job and its record: one transaction
        again = await api.call("POST", "/jobs", as_="a-writer", json=body(idempotencyKey="once"))
        assert again.status == 409  # the refused insert wrote no record; the hook writes the 409's
        trail = await api.call("GET", "/audit?tenantId=tenant-a", as_="admin")
    rows = [(r["action"], r["status"], r["jobId"]) for r in reversed(trail.json["records"])]
    assert rows == [("POST /jobs", 201, created.json["id"]), ("POST /jobs", 409, None)]


async def test_a_tenant_admin_reads_only_its_own_audit_records(api: AuthApi) -> None:
    await api.call("POST", "/jobs", as_="a-writer", json=body())
    await api.call("POST", "/jobs", as_="b-writer", json=body(tenant="tenant-b"))
    mine = await api.call("GET", "/audit", as_="a-admin")
    assert {r["tenantId"] for r in mine.json["records"]} == {"tenant-a"}
    theirs = await api.call("GET", "/audit?tenantId=tenant-b", as_="a-admin")
    assert theirs.status == 403


async def test_audit_pages_back_with_next_before(api: AuthApi) -> None:
    for _ in range(3):
        await api.call("POST", "/jobs", as_="a-writer", json=body())
    first = await api.call("GET", "/audit?limit=2", as_="admin")
    cursor = first.json["nextBefore"]
    assert cursor == first.json["records"][-1]["id"]
    second = await api.call("GET", f"/audit?limit=2&before={cursor}", as_="admin")
    assert len(second.json["records"]) == 1
    assert second.json["nextBefore"] is None


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=x", "jobId=nothex", "since=yesterday", "color=red", "before=1"]
)
async def test_bad_audit_queries_are_400(api: AuthApi, query: str) -> None:
    reply = await api.call("GET", f"/audit?{query}", as_="admin")
    assert reply.status == 400
    assert list(reply.json) == ["error"]


def test_the_production_store_counts_the_audit_records_it_could_not_write(
    settings: Settings,
) -> None:
    metrics = Metrics()
    store = production_store(settings, metrics)  # no I/O before start()
    assert isinstance(store, MongoJobStore)
    assert store._on_audit_failure is not None
    store._on_audit_failure()
    assert metrics.registry.get_sample_value("api_audit_write_failures_total") == 1
