"""The API on the real MongoDB-protocol server while that server hangs.

A proxy between the store and the server holds every byte (as a SIGSTOPped server would),
without touching the shared server itself. Requests must answer 503 with ``Retry-After``
within API_STORE_TIMEOUT, although pymongo's calls run in worker threads that stay blocked;
a create whose insert lands once the server answers again is stored, and the client's retry
with the same idempotencyKey gets the 409."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from jobscheduler.api import create_app
from jobscheduler.bus.local import LocalBus
from jobscheduler.clock import SystemClock
from jobscheduler.config import Settings
from jobscheduler.election.local import LocalElector
from jobscheduler.handlers import default_registry
from jobscheduler.roles.deps import Deps
from jobscheduler.store.mongo import MongoJobStore
from tests.contract.store_fixtures import drop_database, mongo_uri, unique_database_name
from tests.support.mongo import FaultProxy, server_address, via

pytestmark = pytest.mark.integration

API_STORE_TIMEOUT = 1.0


def body(key: str) -> dict[str, object]:
    return {
        "idempotencyKey": key,
        "tenantId": "tenant-faults",
        "jobType": "noop",
        "scheduledAt": "2099-01-01T00:00:00Z",
    }


@pytest.fixture
async def proxied() -> AsyncIterator[tuple[FaultProxy, int]]:
    """A freezable proxy to the server, and its port."""
    fault_proxy = FaultProxy(server_address(mongo_uri()))
    async with trio.open_nursery() as nursery:
        port: int = await nursery.start(fault_proxy.run)
        yield fault_proxy, port
        fault_proxy.thaw()
        fault_proxy.stop()


@pytest.fixture
def proxy(proxied: tuple[FaultProxy, int]) -> FaultProxy:
    return proxied[0]


@pytest.fixture
async def store(proxied: tuple[FaultProxy, int]) -> AsyncIterator[MongoJobStore]:
    database = unique_database_name("js_api_faults")
    uri = via(mongo_uri(), proxied[1])
    mongo = MongoJobStore(uri, database, server_selection_timeout=5.0, limiter_tokens=4)
    await mongo.start()
    try:
        yield mongo
    finally:
        await mongo.close()
        await drop_database(mongo_uri(), database)


async def test_frozen_store_gives_503_within_the_bound_and_a_late_insert_gives_409_on_retry(
    proxy: FaultProxy, store: MongoJobStore, tmp_path: Path
) -> None:
    settings = Settings(api_store_timeout=API_STORE_TIMEOUT, sqlite_path=str(tmp_path / "x.db"))
    deps = Deps(
        settings=settings,
        store=store,
        bus=LocalBus(),
        elector=LocalElector(),
        registry=default_registry(),
        clock=SystemClock(),
    )
    app = create_app(deps)
    async with app.test_app() as test_app:
        client = test_app.test_client()
        assert (await client.post("/jobs", json=body("before"))).status_code == 201

        proxy.freeze()
        # More requests than the store has threads: each still answers within the bound.
        replies = []
        late_keys = [f"late-{n}" for n in range(6)]
        for key in late_keys:
            started = time.monotonic()
            response = await client.post("/jobs", json=body(key))
            replies.append((response, time.monotonic() - started))
        started = time.monotonic()
        listed = await client.get("/jobs", query_string={"tenantId": "tenant-faults"})
        list_elapsed = time.monotonic() - started
        timings = [elapsed for _, elapsed in replies] + [list_elapsed]
        print(f"503 answers while frozen: {min(timings):.2f}-{max(timings):.2f}s")
        for response, elapsed in [*replies, (listed, list_elapsed)]:
            assert response.status_code == 503
            assert response.headers["Retry-After"] == "1"
            assert "error" in await response.get_json()
            assert elapsed < API_STORE_TIMEOUT + 1.0  # well inside a client's 5 s

        proxy.thaw()
        # Once the server answers again, every client retry settles: 409 if the create that
        # got the 503 was stored after all (its detached insert landed), else 201. Either
        # way each key ends up stored exactly once: nothing is lost or duplicated.
        outcomes: dict[str, int] = {}
        with trio.fail_after(60):
            for key in late_keys:
                while True:
                    retry = await client.post("/jobs", json=body(key))
                    if retry.status_code != 503:
                        break
                    await trio.sleep(0.2)
                assert retry.status_code in (201, 409), await retry.get_data()
                if retry.status_code == 409:
                    assert key in (await retry.get_json())["error"]
                outcomes[key] = retry.status_code
        stored = [j.idempotency_key for j in await store.list_jobs("tenant-faults", None, 50)]
        assert sorted(stored) == sorted(["before", *late_keys])
        print(f"late creates stored after their 503 (retry got 409): {outcomes}")


async def test_readiness_of_the_production_roles_names_store_kafka_and_etcd(
    tmp_path: Path,
) -> None:
    from jobscheduler.process.assembly import production_deps

    settings = Settings.from_env(
        {
            "MONGO_URI": mongo_uri(),
            "MONGO_DB": unique_database_name("js_ready"),
        }
    )
    deps = production_deps(settings, role="scheduler")
    await deps.store.start()
    try:
        deps.health.add_readiness("store", deps.store.ping)
        ready, checks = await deps.health.readiness()
    finally:
        await deps.store.close()
        await drop_database(mongo_uri(), settings.mongo_db)
    assert (ready, checks) == (True, {"store": "ok", "kafka": "ok", "etcd": "ok"})


async def test_readiness_fails_fast_and_names_an_unreachable_kafka_and_etcd() -> None:
    from jobscheduler.process.assembly import production_deps

    settings = Settings.from_env({"KAFKA_BROKERS": "127.0.0.1:1", "ETCD_ENDPOINTS": "127.0.0.1:1"})
    deps = production_deps(settings, role="scheduler")
    started = time.monotonic()
    ready, checks = await deps.health.readiness()
    assert time.monotonic() - started < deps.health.timeout + 1.0
    assert not ready
    assert set(checks) == {"kafka", "etcd"}
    assert checks["kafka"] != "ok"
    assert checks["etcd"] != "ok"
