"""The webhook routes: register (the secret shown once), list, delete, read deliveries;
admins only, each tenant's admin within its own tenant; every route declared (the
isolation suite calls them too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jobscheduler.domain.notifications import MAX_WEBHOOKS_PER_TENANT, DeliveryStatus
from jobscheduler.roles.notifier.loop import Notifier
from jobscheduler.roles.notifier.sender import TryResult

from .conftest import DepsFactory
from .tenancy_support import AuthApi, auth_deps, serve_auth
from .test_notifier import FakeSender, dead_letter

HOOK = {"url": "https://hooks.example.com/dlq", "events": ["job.dlq"], "name": "ops"}


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[AuthApi]:
    async with serve_auth(auth_deps(make_deps)) as served:
        yield served


async def test_a_tenant_admin_registers_a_webhook_and_sees_its_secret_once(api: AuthApi) -> None:
    created = await api.call("POST", "/webhooks", as_="a-admin", json=HOOK)
    assert created.status == 201, created.text
    hook = created.json
    assert hook["tenantId"] == "tenant-a"
    assert hook["events"] == ["job.dlq"]
    assert hook["secret"].startswith("whsec_")
    listed = await api.call("GET", "/webhooks", as_="a-admin")
    assert listed.status == 200
    assert [h["id"] for h in listed.json] == [hook["id"]]
    assert "secret" not in listed.json[0]
    assert (await api.call("GET", "/webhooks", as_="b-admin")).json == []
    stored = await api.deps.store.get_webhook(hook["id"])
    assert stored is not None
    assert stored.secret == hook["secret"]


async def test_writers_and_other_tenants_cannot_register_webhooks(api: AuthApi) -> None:
    assert (await api.call("POST", "/webhooks", as_="a-writer", json=HOOK)).status == 403
    other = {**HOOK, "tenantId": "tenant-b"}
    assert (await api.call("POST", "/webhooks", as_="a-admin", json=other)).status == 403
    everyone = await api.call("POST", "/webhooks", as_="admin", json=other)
    assert everyone.status == 201
    assert everyone.json["tenantId"] == "tenant-b"
    assert (await api.call("POST", "/webhooks", as_="admin", json=HOOK)).status == 400


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"url": "ftp://x.example", "events": ["job.dlq"]}, "url: only http and https"),
        ({"url": "https://u:p@x.example", "events": ["job.dlq"]}, "url: credentials"),
        ({"url": "https://x.example", "events": ["job.done"]}, "unknown event type 'job.done'"),
        ({"url": "https://x.example", "events": []}, "events"),
        ({"url": "https://x.example", "events": ["job.dlq"], "secret": "x"}, "secret"),
    ],
)
async def test_a_bad_registration_is_a_400_naming_the_field(
    api: AuthApi, body: dict[str, object], fragment: str
) -> None:
    reply = await api.call("POST", "/webhooks", as_="a-admin", json=body)
    assert reply.status == 400
    assert fragment in reply.json["error"]


async def test_a_tenant_has_at_most_so_many_webhooks(api: AuthApi) -> None:
    for _ in range(MAX_WEBHOOKS_PER_TENANT):
        assert (await api.call("POST", "/webhooks", as_="a-admin", json=HOOK)).status == 201
    refused = await api.call("POST", "/webhooks", as_="a-admin", json=HOOK)
    assert refused.status == 400
    assert "delete one first" in refused.json["error"]


async def test_deleting_is_for_the_owner_tenant_and_answers_the_webhook(api: AuthApi) -> None:
    hook = (await api.call("POST", "/webhooks", as_="a-admin", json=HOOK)).json
    assert (await api.call("DELETE", f"/webhooks/{hook['id']}", as_="b-admin")).status == 404
    deleted = await api.call("DELETE", f"/webhooks/{hook['id']}", as_="a-admin")
    assert deleted.status == 200
    assert deleted.json["id"] == hook["id"]
    assert "secret" not in deleted.json
    assert (await api.call("DELETE", f"/webhooks/{hook['id']}", as_="a-admin")).status == 404
    assert (await api.call("DELETE", "/webhooks/not-an-id", as_="a-admin")).status == 404


async def test_the_delivery_log_shows_status_attempts_and_last_error(api: AuthApi) -> None:
    hook = (await api.call("POST", "/webhooks", as_="a-admin", json=HOOK)).json
    store = api.deps.store
    await dead_letter(store)
    await Notifier(api.deps, FakeSender(TryResult(500, "answered 500"))).run_pass()
    reply = await api.call("GET", f"/webhooks/{hook['id']}/deliveries", as_="a-admin")
    assert reply.status == 200, reply.text
    [delivery] = reply.json["deliveries"]
    assert delivery["status"] == DeliveryStatus.PENDING.value
    assert delivery["attempts"] == 1
    assert delivery["lastError"] == "answered 500"
    assert delivery["lastStatus"] == 500
    assert delivery["eventType"] == "job.dlq"
    assert "nextAttemptAt" in delivery
    assert "body" not in delivery
    other = await api.call("GET", f"/webhooks/{hook['id']}/deliveries", as_="b-admin")
    assert other.status == 404
    bad = await api.call("GET", f"/webhooks/{hook['id']}/deliveries?limit=0", as_="a-admin")
    assert bad.status == 400
