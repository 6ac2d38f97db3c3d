"""``GET /stats/overview``: tenant scope, cluster facts only for all-tenant principals, input
checks; and the presence beat that feeds its cluster part."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import attrs
import pytest
import trio
import trio.testing

from jobscheduler.domain.model import Status
from jobscheduler.domain.retention import PruneSummary
from jobscheduler.domain.workers import BEAT_INTERVAL, MISSED_BEATS, WorkerBeat, expiry
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.presence import Presence
from jobscheduler.roles.scheduler.loop import run_scheduler

from .conftest import BASE, DepsFactory, make_job
from .tenancy_support import AuthApi, auth_deps, serve_auth


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[AuthApi]:
    async with serve_auth(auth_deps(make_deps)) as served:
        yield served


async def seed(api: AuthApi) -> None:
    store = api.deps.store
    await store.insert(make_job(tenant="tenant-a", scheduled_at=BASE - timedelta(seconds=30)))
    done = make_job(tenant="tenant-a", created_at=BASE - timedelta(minutes=5))
    await store.insert(attrs.evolve(done, status=Status.COMPLETED, updated_at=BASE))
    dead = make_job(tenant="tenant-b", created_at=BASE - timedelta(minutes=5))
    await store.insert(attrs.evolve(dead, status=Status.DLQ, updated_at=BASE))
    for beat in (
        WorkerBeat(
            id="scheduler:s1",
            role="scheduler",
            host="h1",
            pid=1,
            leader=True,
            started_at=BASE,
            seen_at=BASE,
            expires_at=expiry(BASE),
        ),
        WorkerBeat(
            id="executor:e1",
            role="executor",
            host="h2",
            pid=2,
            job_types=("noop", "email"),
            in_flight=3,
            started_at=BASE,
            seen_at=BASE,
            expires_at=expiry(BASE),
        ),
    ):
        await store.beat_worker(beat)


async def test_a_tenant_key_sees_its_own_figures_and_no_cluster(api: AuthApi) -> None:
    await seed(api)
    reply = await api.call("GET", "/stats/overview", as_="a-reader")
    assert reply.status == 200
    body = reply.json
    assert body["tenantId"] == "tenant-a"
    assert body["byStatus"]["pending"] == 1
    assert body["byStatus"]["completed"] == 1
    assert body["byStatus"]["dlq"] == 0 == body["dlq"]
    assert body["total"] == 2
    assert body["queueLagSeconds"] == 30.0
    assert body["throughput"]["minutes"] == 60
    assert body["throughput"]["completed"][-1] == 1
    assert sum(body["throughput"]["failed"]) == 0
    assert body["cluster"] is None


async def test_a_tenant_key_naming_another_tenant_is_refused(api: AuthApi) -> None:
    reply = await api.call("GET", "/stats/overview?tenantId=tenant-b", as_="a-admin")
    assert reply.status == 403


async def test_an_all_tenant_key_sees_every_tenant_and_the_cluster(api: AuthApi) -> None:
    await seed(api)
    body = (await api.call("GET", "/stats/overview", as_="admin")).json
    assert body["tenantId"] is None
    assert body["total"] == 3
    assert body["dlq"] == 1
    cluster = body["cluster"]
    assert cluster["leader"]["id"] == "scheduler:s1"
    assert cluster["leaders"] == 1
    [executor] = cluster["executors"]
    assert executor["jobTypes"] == ["noop", "email"]
    assert executor["inFlight"] == 3
    # Naming a tenant narrows the figures; the cluster stays (it is every tenant's).
    scoped = (await api.call("GET", "/stats/overview?tenantId=tenant-b", as_="admin")).json
    assert scoped["byStatus"]["dlq"] == 1
    assert scoped["total"] == 1
    assert scoped["cluster"] is not None


async def test_an_expired_executor_is_not_shown(api: AuthApi) -> None:
    await seed(api)
    api.deps.clock.advance(BEAT_INTERVAL * MISSED_BEATS + 1)  # type: ignore[attr-defined]
    cluster = (await api.call("GET", "/stats/overview", as_="admin")).json["cluster"]
    assert cluster == {"leader": None, "leaders": 0, "schedulers": [], "executors": []}


@pytest.mark.parametrize(
    ("query", "message"),
    [("?status=dlq", "unknown query parameter"), ("?tenantId=", "tenantId")],
)
async def test_bad_query_is_a_400_that_says_why(api: AuthApi, query: str, message: str) -> None:
    reply = await api.call("GET", f"/stats/overview{query}", as_="admin")
    assert reply.status == 400
    assert message in reply.json["error"]


async def live_when(deps: Deps, condition: Callable[[list[WorkerBeat]], bool]) -> list[WorkerBeat]:
    """The live records once ``condition`` holds (polled: nothing signals a beat), failing
    after a few beats."""
    with trio.fail_after(4 * BEAT_INTERVAL):
        while True:
            records = await deps.store.live_workers(deps.clock.now())
            if condition(records):
                return records
            await trio.sleep(0.5)


async def test_presence_beats_keep_the_record_fresh_and_exit_forgets_it(
    make_deps: DepsFactory, autojump_clock: trio.testing.MockClock
) -> None:
    deps = make_deps()
    in_flight = [0]
    presence = Presence(deps, "executor", job_types=["noop"], in_flight=lambda: in_flight[0])
    async with trio.open_nursery() as nursery:
        await nursery.start(presence.run)
        [record] = await live_when(deps, lambda records: len(records) == 1)
        assert (record.id, record.job_types, record.in_flight) == (presence.id, ("noop",), 0)
        in_flight[0] = 4
        await live_when(deps, lambda records: records[0].in_flight == 4)
        nursery.cancel_scope.cancel()
    assert await deps.store.live_workers(deps.clock.now()) == []


async def test_the_scheduler_records_itself_as_leader(
    make_deps: DepsFactory, autojump_clock: trio.testing.MockClock
) -> None:
    deps = make_deps()
    async with trio.open_nursery() as nursery:
        await nursery.start(run_scheduler, deps)
        records = await live_when(deps, lambda records: any(r.leader for r in records))
        assert [(r.role, r.leader) for r in records] == [("scheduler", True)]
        nursery.cancel_scope.cancel()


async def test_the_tenant_switcher_is_for_all_tenant_keys_only(api: AuthApi) -> None:
    admin = await api.call("GET", "/ui", as_="admin")
    assert 'id="tenant-switcher"' in admin.text
    # "All tenants" chosen; the tenants holding jobs are offered by the page's script.
    assert '<option value="" selected>All tenants</option>' in admin.text
    chosen = await api.call("GET", "/ui?tenantId=tenant-a", as_="admin")
    assert '<option value="tenant-a" selected>tenant-a</option>' in chosen.text
    tenant = await api.call("GET", "/ui?tenantId=tenant-b", as_="a-reader")
    assert 'id="tenant-switcher"' not in tenant.text
    assert 'data-api="/stats/overview"' in tenant.text  # its own tenant, whatever it asked
    assert 'id="ov-no-cluster"' in tenant.text


async def test_the_overview_shows_the_retention_and_the_last_prune(api: AuthApi) -> None:
    body = (await api.call("GET", "/stats/overview", as_="a-reader")).json
    assert body["retention"] == {
        "defaults": {"cancelled": "7d", "completed": "7d", "dlq": "30d"},
        "lastPrune": None,
    }
    summary = PruneSummary(at=BASE, took=2.5, pruned={Status.COMPLETED: 40}, archived=0)
    await api.deps.store.record_prune(summary)
    body = (await api.call("GET", "/stats/overview", as_="a-reader")).json
    assert body["retention"]["lastPrune"]["pruned"] == {"completed": 40}
