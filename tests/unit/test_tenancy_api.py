"""Authentication, roles and tenant binding through the HTTP API (``AUTH=required`` unless a
test says otherwise): the one generic 401, what each role may do, the tenant a request is
bound to (batches included), and an all-tenant admin's view of every tenant."""

from __future__ import annotations

import pytest

from jobscheduler.api.errors import UNAUTHORIZED_MESSAGE
from jobscheduler.domain.keys import MAX_TOKEN_LENGTH, Role
from jobscheduler.domain.model import new_job_id

from .conftest import DepsFactory, sample
from .tenancy_support import (
    AuthApi,
    auth_api,  # noqa: F401  (registers the ``api`` fixture)
    body,
)

# ----------------------------------------------------------------------- 401


BAD_AUTHORIZATION: dict[str, list[tuple[str, str]]] = {
    "missing": [],
    "empty": [("Authorization", "")],
    "basic scheme": [("Authorization", "Basic dXNlcjpwYXNz")],
    "bearer without token": [("Authorization", "Bearer")],
    "not a key": [("Authorization", "Bearer hello")],
    "huge": [("Authorization", "Bearer jsk_" + "a" * 20_000)],
    "just too long": [("Authorization", "Bearer " + "x" * (MAX_TOKEN_LENGTH + 1))],
    "non-ascii": [("Authorization", "Bearer jsk_ééééééééééééééé_" + "ü" * 43)],
    "unknown id": [("Authorization", "Bearer jsk_0123456789abcdef_" + "A" * 43)],
}


@pytest.mark.parametrize("case", sorted(BAD_AUTHORIZATION))
async def test_bad_or_missing_authorization_is_one_generic_401(api: AuthApi, case: str) -> None:
    reply = await api.call("GET", "/jobs", headers=BAD_AUTHORIZATION[case])
    assert reply.status == 401
    assert reply.headers["WWW-Authenticate"] == "Bearer"
    assert reply.json == {"error": UNAUTHORIZED_MESSAGE}


async def test_a_wrong_secret_for_a_real_key_id_is_the_same_401(api: AuthApi) -> None:
    real = api.tokens["a-writer"]
    forged = real[: -len("x")] + ("A" if real[-1] != "A" else "B")
    reply = await api.call("GET", "/jobs", headers={"Authorization": f"Bearer {forged}"})
    assert (reply.status, reply.json) == (401, {"error": UNAUTHORIZED_MESSAGE})


async def test_two_authorization_headers_are_refused_even_if_one_is_valid(api: AuthApi) -> None:
    token = api.tokens["a-writer"]
    reply = await api.call(
        "GET",
        "/jobs",
        headers=[("Authorization", f"Bearer {token}"), ("Authorization", f"Bearer {token}")],
    )
    assert (reply.status, reply.json) == (401, {"error": UNAUTHORIZED_MESSAGE})


async def test_the_bearer_scheme_is_case_insensitive(api: AuthApi) -> None:
    token = api.tokens["a-reader"]
    reply = await api.call("GET", "/jobs", headers={"Authorization": f"bearer {token}"})
    assert reply.status == 200


async def test_healthz_needs_no_key(api: AuthApi) -> None:
    reply = await api.call("GET", "/healthz")
    assert (reply.status, reply.text) == (200, "ok")


async def test_an_unknown_path_is_401_without_a_key_and_404_with_one(api: AuthApi) -> None:
    assert (await api.call("GET", "/nope")).status == 401
    assert (await api.call("GET", "/nope", as_="a-reader")).status == 404


async def test_auth_failures_are_counted(api: AuthApi) -> None:
    await api.call("GET", "/jobs")
    assert sample(api.deps.metrics, "api_auth_failures_total") == 1.0


# ----------------------------------------------------------------------- roles + tenants


async def test_a_reader_reads_but_cannot_create(api: AuthApi) -> None:
    created = await api.call("POST", "/jobs", as_="a-writer", json=body())
    assert created.status == 201
    assert (await api.call("GET", f"/jobs/{created.json['id']}", as_="a-reader")).status == 200
    refused = await api.call("POST", "/jobs", as_="a-reader", json=body())
    assert refused.status == 403
    assert "reader" in refused.json["error"]


async def test_the_tenant_comes_from_the_key_when_the_body_names_none(api: AuthApi) -> None:
    created = await api.call("POST", "/jobs", as_="a-writer", json=body(tenant=None))
    assert created.status == 201
    assert created.json["tenantId"] == "tenant-a"
    listed = await api.call("GET", "/jobs", as_="a-reader")
    assert [j["id"] for j in listed.json] == [created.json["id"]]


async def test_naming_another_tenant_is_403(api: AuthApi) -> None:
    create = await api.call("POST", "/jobs", as_="a-writer", json=body(tenant="tenant-b"))
    assert create.status == 403
    listing = await api.call("GET", "/jobs?tenantId=tenant-b", as_="a-admin")
    assert listing.status == 403
    assert await api.deps.store.list_jobs("tenant-b", None, 10) == []


async def test_another_tenants_job_is_404_exactly_like_a_missing_id(api: AuthApi) -> None:
    theirs = (await api.call("POST", "/jobs", as_="b-writer", json=body(tenant="tenant-b"))).json
    seen = await api.call("GET", f"/jobs/{theirs['id']}", as_="a-admin")
    missing_id = new_job_id()
    missing = await api.call("GET", f"/jobs/{missing_id}", as_="a-admin")
    assert seen.status == missing.status == 404
    assert seen.text == missing.text.replace(missing_id, theirs["id"])


async def test_an_idempotency_key_used_by_another_tenant_is_no_conflict(api: AuthApi) -> None:
    mine = await api.call("POST", "/jobs", as_="a-writer", json=body(idempotencyKey="same"))
    theirs = await api.call(
        "POST", "/jobs", as_="b-writer", json=body(tenant="tenant-b", idempotencyKey="same")
    )
    assert (mine.status, theirs.status) == (201, 201)
    again = await api.call("POST", "/jobs", as_="a-writer", json=body(idempotencyKey="same"))
    assert again.status == 409


async def test_an_all_tenant_admin_names_the_tenant(api: AuthApi) -> None:
    created = await api.call("POST", "/jobs", as_="admin", json=body(tenant="tenant-b"))
    assert created.status == 201
    missing = await api.call("POST", "/jobs", as_="admin", json=body(tenant=None))
    assert missing.status == 400
    assert "tenantId" in missing.json["error"]


async def test_a_route_that_declares_no_role_is_admin_only(api: AuthApi) -> None:
    @api.app.post("/undeclared")
    async def undeclared() -> str:
        return "done"

    assert (await api.call("POST", "/undeclared", as_="a-writer")).status == 403
    assert (await api.call("POST", "/undeclared", as_="a-admin")).status == 200


async def test_with_auth_off_every_caller_is_the_operator(make_deps: DepsFactory) -> None:
    from jobscheduler.api import create_app

    app = create_app(make_deps())
    async with app.test_app() as test_app:
        client = test_app.test_client()
        created = await client.post("/jobs", json=body(tenant="anyone"))
        assert created.status_code == 201
        keys = await client.get("/keys")
        assert keys.status_code == 200
        trail = await client.get("/audit")
        records = (await trail.get_json())["records"]
        assert [(r["action"], r["keyId"], r["tenantId"]) for r in records] == [
            ("POST /jobs", None, "anyone")
        ]


def test_roles_order_reader_writer_admin() -> None:
    assert Role.READER.rank < Role.WRITER.rank < Role.ADMIN.rank


# ------------------------------------------------------------ every tenant at once


async def test_an_all_tenant_admin_lists_every_tenants_jobs_only_when_it_asks_for_them(
    api: AuthApi,
) -> None:
    ids = {}
    for tenant, writer in (("tenant-a", "a-writer"), ("tenant-b", "b-writer")):
        created = await api.call("POST", "/jobs", as_=writer, json=body(tenant=tenant))
        ids[tenant] = created.json["id"]
    # The seed's contract: no tenantId is a 400, for an admin of every tenant too.
    missing = await api.call("GET", "/jobs", as_="admin")
    assert missing.status == 400
    assert missing.json["error"] == "tenantId is required"
    every = await api.call("GET", "/jobs?allTenants=true", as_="admin")
    assert every.status == 200
    assert {(j["tenantId"], j["id"]) for j in every.json} == set(ids.items())
    # Filters and pages work across tenants too; the next page's link keeps the form.
    page = await api.call("GET", "/jobs?allTenants=true&limit=1&status=pending", as_="admin")
    assert len(page.json) == 1
    assert "allTenants=true" in page.headers["Link"]
    no = await api.call("GET", "/jobs?allTenants=false&tenantId=tenant-b", as_="admin")
    assert [j["id"] for j in no.json] == [ids["tenant-b"]]


@pytest.mark.parametrize(
    ("query", "who", "status", "fragment"),
    [
        ("allTenants=true", "a-admin", 403, "bound"),
        ("allTenants=true", "a-reader", 403, "reader"),
        ("allTenants=true&tenantId=tenant-a", "admin", 400, "not both"),
        ("allTenants=yes", "admin", 400, "allTenants: must be true or false"),
    ],
)
async def test_listing_every_tenant_is_refused_to_tenant_keys_and_when_ambiguous(
    api: AuthApi, query: str, who: str, status: int, fragment: str
) -> None:
    reply = await api.call("GET", f"/jobs?{query}", as_=who)
    assert reply.status == status, reply.text
    assert fragment in reply.json["error"]


async def test_tenants_lists_the_tenants_holding_jobs_to_admins_only(api: AuthApi) -> None:
    for tenant, writer in (("tenant-b", "b-writer"), ("tenant-a", "a-writer")):
        assert (await api.call("POST", "/jobs", as_=writer, json=body(tenant=tenant))).status == 201
    every = await api.call("GET", "/tenants", as_="admin")
    assert every.json == {"tenants": ["tenant-a", "tenant-b"], "truncated": False}
    first = await api.call("GET", "/tenants?limit=1", as_="admin")
    assert first.json == {"tenants": ["tenant-a"], "truncated": True}
    # A tenant's admin sees its own tenant only; a writer nothing.
    own = await api.call("GET", "/tenants", as_="b-admin")
    assert own.json == {"tenants": ["tenant-b"], "truncated": False}
    assert (await api.call("GET", "/tenants", as_="a-writer")).status == 403
    bad = await api.call("GET", "/tenants?limit=0", as_="admin")
    assert bad.status == 400
    assert "limit" in bad.json["error"]


# ----------------------------------------------------------------------- batch


async def test_a_batch_takes_the_keys_tenant_and_refuses_another(api: AuthApi) -> None:
    ok = await api.call(
        "POST", "/jobs/batch", as_="a-writer", json={"jobs": [body(tenant=None), body()]}
    )
    assert ok.status == 200, ok.text
    assert [r["job"]["tenantId"] for r in ok.json["results"]] == ["tenant-a", "tenant-a"]
    mixed = await api.call(
        "POST", "/jobs/batch", as_="a-writer", json={"jobs": [body(), body(tenant="tenant-b")]}
    )
    assert mixed.status == 403
    assert await api.deps.store.list_jobs("tenant-b", None, 10) == []
    reader = await api.call("POST", "/jobs/batch", as_="a-reader", json={"jobs": [body()]})
    assert reader.status == 403


async def test_a_409_never_names_another_tenants_job(api: AuthApi) -> None:
    await api.call(
        "POST", "/jobs", as_="b-writer", json=body(tenant="tenant-b", idempotencyKey="k")
    )
    mine = await api.call("POST", "/jobs", as_="a-writer", json=body(idempotencyKey="k"))
    again = await api.call("POST", "/jobs", as_="a-writer", json=body(idempotencyKey="k"))
    assert again.status == 409
    assert again.json["jobId"] == mine.json["id"]
    batch = await api.call(
        "POST", "/jobs/batch", as_="a-writer", json={"jobs": [body(idempotencyKey="k")]}
    )
    assert batch.json["results"][0]["jobId"] == mine.json["id"]
