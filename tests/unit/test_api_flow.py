"""The flow-control routes: limits read and overridden per tenant, weights set by an admin
of every tenant only, what the leader holds back, and a held job's reason on its page."""

from __future__ import annotations

from datetime import timedelta

import attrs

from jobscheduler.clock import ManualClock
from jobscheduler.domain.flow import FlowReport, TenantWeight
from jobscheduler.handlers import JobContext, default_registry
from jobscheduler.roles.deps import Deps
from tests.support.flow_holds import key_hold

from .conftest import BASE, DepsFactory, make_job
from .tenancy_support import auth_deps, serve_auth


async def _mail(ctx: JobContext) -> None:
    return None


def deps_with_mail(make_deps: DepsFactory) -> Deps:
    """Keys required, and a ``mail`` type declaring limits."""
    registry = default_registry()
    registry.register("mail", _mail, concurrency=1, rate_limit="100/s")
    settings = attrs.evolve(make_deps.settings, auth="required")
    return make_deps(registry=registry, settings=settings, clock=ManualClock(BASE))


async def test_a_tenant_admin_overrides_its_own_limits_and_reads_them_with_the_defaults(
    make_deps: DepsFactory,
) -> None:
    async with serve_auth(deps_with_mail(make_deps)) as api:
        put = await api.call(
            "PUT",
            "/flow/limits/mail?tenantId=tenant-a",
            as_="a-admin",
            json={"concurrency": 3, "keyRateLimit": "10/m", "burst": None},
        )
        assert put.status == 200, put.text
        assert put.json["effective"] == {
            "concurrency": 3,
            "rateLimit": "100/s",
            "keyRateLimit": "10/m",
        }
        listed = await api.call("GET", "/flow/limits", as_="a-admin")
        assert listed.json["defaults"]["mail"] == {"concurrency": 1, "rateLimit": "100/s"}
        assert [o["tenantId"] for o in listed.json["overrides"]] == ["tenant-a"]
        assert (await api.call("GET", "/flow/limits", as_="b-admin")).json["overrides"] == []
        reset = await api.call(
            "PUT", "/flow/limits/mail", as_="a-admin", json={"concurrency": None}
        )
        assert reset.status == 200
        assert (await api.call("GET", "/flow/limits", as_="a-admin")).json["overrides"] == []


async def test_a_bad_limit_or_an_unknown_job_type_is_a_400_and_a_writer_is_refused(
    make_deps: DepsFactory,
) -> None:
    async with serve_auth(deps_with_mail(make_deps)) as api:
        bad = await api.call("PUT", "/flow/limits/mail", as_="a-admin", json={"rateLimit": "9/d"})
        assert bad.status == 400
        unknown = await api.call("PUT", "/flow/limits/nope", as_="a-admin", json={"burst": 2})
        assert unknown.status == 400
        writer = await api.call("PUT", "/flow/limits/mail", as_="a-writer", json={"burst": 2})
        assert writer.status == 403


async def test_only_an_admin_of_every_tenant_sets_weights_and_a_tenant_sees_only_its_own(
    make_deps: DepsFactory,
) -> None:
    async with serve_auth(auth_deps(make_deps)) as api:
        own = await api.call("PUT", "/flow/weights/tenant-a", as_="a-admin", json={"weight": 9})
        assert own.status == 403
        for tenant, weight in (("tenant-a", 2), ("tenant-b", 3)):
            put = await api.call(
                "PUT", f"/flow/weights/{tenant}", as_="admin", json={"weight": weight}
            )
            assert put.status == 200
        assert await api.deps.store.tenant_weights() == [
            TenantWeight(tenant_id="tenant-a", weight=2),
            TenantWeight(tenant_id="tenant-b", weight=3),
        ]
        seen = await api.call("GET", "/flow/weights", as_="a-admin")
        assert seen.json == {"weights": [{"tenantId": "tenant-a", "weight": 2}]}


async def test_a_held_job_says_why_and_the_held_list_is_the_tenants_own(
    make_deps: DepsFactory,
) -> None:
    async with serve_auth(deps_with_mail(make_deps)) as api:
        store = api.deps.store
        job = await store.insert(
            make_job(
                tenant="tenant-a",
                job_type="mail",
                concurrency_key="customer-42",
                scheduled_at=BASE - timedelta(seconds=1),
            )
        )
        hold = key_hold("tenant-a", "customer-42", waiting=4)
        other = key_hold("tenant-b", "x", waiting=9)
        await store.put_flow_report(FlowReport(at=BASE, holds=(hold, other)))
        page = await api.call("GET", f"/jobs/{job.id}", as_="a-reader")
        assert page.json["held"] == "waiting: customer-42 has 1 of 1 running"
        held = await api.call("GET", "/flow/held", as_="a-reader")
        assert [h["key"] for h in held.json["holds"]] == ["customer-42"]
        everyone = await api.call("GET", "/flow/held?limit=1", as_="admin")
        assert [h["key"] for h in everyone.json["holds"]] == ["x"]
