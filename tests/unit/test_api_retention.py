"""``/retention``: the rules the reaper prunes by, and a tenant's override set by an admin
(scoped to the admin's tenant, checked, audited)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jobscheduler.domain.model import Status
from jobscheduler.domain.retention import Override, Scope

from .conftest import BASE, DepsFactory
from .tenancy_support import AuthApi, auth_deps, serve_auth


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[AuthApi]:
    async with serve_auth(auth_deps(make_deps)) as served:
        yield served


async def test_the_defaults_come_from_the_settings(api: AuthApi) -> None:
    body = (await api.call("GET", "/retention", as_="admin")).json
    assert body == {
        "defaults": {"cancelled": "7d", "completed": "7d", "dlq": "30d"},
        "overrides": [],
        "lastPrune": None,
    }


async def test_an_admin_sets_and_clears_a_tenants_override(api: AuthApi) -> None:
    reply = await api.call(
        "PUT", "/retention/tenant-a", as_="a-admin", json={"completed": "1d", "dlq": "90d"}
    )
    assert reply.status == 200, reply.text
    assert reply.json["retention"] == {"completed": "1d", "dlq": "90d"}
    [stored] = await api.deps.store.retention_overrides()
    assert stored.keep == {Status.COMPLETED: 86400.0, Status.DLQ: 90 * 86400.0}
    listed = (await api.call("GET", "/retention", as_="admin")).json["overrides"]
    assert [o["name"] for o in listed] == ["tenant-a"]
    cleared = await api.call("DELETE", "/retention/tenant-a", as_="a-admin")
    assert cleared.status == 200
    assert cleared.json["overrides"] == []
    assert await api.deps.store.retention_overrides() == []


async def test_a_tenant_admin_sees_job_types_and_its_own_override_only(api: AuthApi) -> None:
    store = api.deps.store
    for scope, name in ((Scope.TENANT, "tenant-b"), (Scope.JOB_TYPE, "email")):
        await store.set_retention(
            Override(scope=scope, name=name, keep={Status.COMPLETED: 60.0}, updated_at=BASE)
        )
    seen = (await api.call("GET", "/retention", as_="a-admin")).json["overrides"]
    assert [(o["scope"], o["name"]) for o in seen] == [("jobType", "email")]


@pytest.mark.parametrize(
    ("as_", "path", "body", "status", "message"),
    [
        ("a-admin", "/retention/tenant-b", {"completed": "1d"}, 403, "another tenant"),
        ("a-writer", "/retention/tenant-a", {"completed": "1d"}, 403, ""),
        ("admin", "/retention/tenant-a", {"running": "1d"}, 400, "running"),
        ("admin", "/retention/tenant-a", {"completed": "soon"}, 400, "duration"),
        ("admin", "/retention/tenant-a", {"completed": "0s"}, 400, "more than zero"),
        ("admin", "/retention/tenant-a", {"completed": 1e12}, 400, "at most 100 years"),
        ("admin", "/retention/tenant-a", {"dlq": "40000d"}, 400, "at most 100 years"),
    ],
)
async def test_a_bad_or_unauthorised_override_is_refused(
    api: AuthApi, as_: str, path: str, body: object, status: int, message: str
) -> None:
    reply = await api.call("PUT", path, as_=as_, json=body)
    assert reply.status == status, reply.text
    assert message in reply.json["error"]
    assert await api.deps.store.retention_overrides() == []
