"""The API under store faults and hostile input: a hung store answers 503 with
``Retry-After`` within API_STORE_TIMEOUT, a create whose insert lands late is stored (and a
retry gets the 409), and no string a client can send reaches a 500."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest
import trio
import trio.testing
from quart_trio import QuartTrio

from jobscheduler.api import RETRY_AFTER_SECONDS
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.clock import ManualClock
from jobscheduler.domain.audit import AuditRecord
from jobscheduler.domain.model import Job, Status
from jobscheduler.errors import StoreError
from jobscheduler.store import JobStore
from jobscheduler.store.query import Cursor, JobQuery, JobStats

from .api_support import Api, Reply, api_deps, create_body, serve
from .conftest import BASE, DepsFactory, ProxyStore, make_settings

TIMEOUT = 2.0


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(api_deps(make_deps)) as served:
        yield served


class HungStore(ProxyStore):
    """The reads and writes of the requests under test (insert, get, list, find, stats)
    wait for ``release`` (a frozen server), then go through; key lookups answer at once."""

    def __init__(self, inner: JobStore) -> None:
        super().__init__(inner)
        self.release = trio.Event()
        self.inserted = trio.Event()

    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        await self.release.wait()
        stored = await self.inner.insert(job, audit=audit)
        self.inserted.set()
        return stored

    async def get(self, job_id: str, *, tenant: str | None = None) -> Job:
        await self.release.wait()
        return await self.inner.get(job_id, tenant=tenant)

    async def list_jobs(self, tenant_id: str, status: Status | None, limit: int) -> list[Job]:
        await self.release.wait()
        return await self.inner.list_jobs(tenant_id, status, limit)

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        await self.release.wait()
        return await self.inner.find_jobs(query, limit, after)

    async def stats(self, tenant_id: str | None, now: datetime) -> JobStats:
        await self.release.wait()
        return await self.inner.stats(tenant_id, now)


def hung_deps(make_deps: DepsFactory, store: JobStore, tmp_path: Any) -> Any:
    settings = make_settings(tmp_path, api_store_timeout=TIMEOUT)
    return make_deps(store=HungStore(store), clock=ManualClock(BASE), settings=settings)


async def raw_request(api: Api, method: str, path: str, **kwargs: Any) -> tuple[Reply, Any]:
    headers = {"Authorization": f"Bearer {api.token}", **kwargs.pop("headers", {})}
    response = await api.client.open(path, method=method, headers=headers, **kwargs)
    return await Reply.read(response), response.headers


REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/jobs", {"json": create_body()}),
    ("GET", f"/jobs/{'a' * 24}", {}),
    ("GET", "/jobs", {"query_string": {"tenantId": "tenant-a"}}),
    ("GET", "/stats", {"query_string": {"tenantId": "tenant-a"}}),
    ("POST", f"/jobs/{'a' * 24}/cancel", {}),
    ("POST", f"/jobs/{'a' * 24}/retry", {}),
    ("POST", f"/jobs/{'a' * 24}/pause", {}),
    ("PATCH", f"/jobs/{'a' * 24}", {"json": {"priority": 1}}),
    ("DELETE", f"/jobs/{'a' * 24}", {}),
]


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    REQUESTS,
    ids=["create", "get", "list", "stats", "cancel", "retry", "pause", "patch", "delete"],
)
async def test_hung_store_answers_503_with_retry_after_once_api_store_timeout_passes(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Any,
    method: str,
    path: str,
    kwargs: dict[str, Any],
) -> None:
    deps = hung_deps(make_deps, store, tmp_path)
    async with serve(deps) as api:
        started = trio.current_time()
        reply, headers = await raw_request(api, method, path, **kwargs)
        elapsed = trio.current_time() - started
        deps.store.release.set()
    assert "did not answer" not in reply.assert_error(503)
    assert headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert elapsed == pytest.approx(TIMEOUT)


async def test_create_whose_insert_lands_after_the_503_is_stored_and_its_retry_gets_409(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Any
) -> None:
    settings = make_settings(tmp_path, api_store_timeout=1.0)
    hung = HungStore(store)
    deps = make_deps(store=hung, clock=ManualClock(BASE), settings=settings)
    async with serve(deps) as api:
        first = await api.create(create_body(idempotencyKey="late-1"))
        first.assert_error(503)
        hung.release.set()  # the store thaws; the detached insert completes
        with trio.fail_after(10):
            await hung.inserted.wait()
        retry = await api.create(create_body(idempotencyKey="late-1"))
    assert retry.status == 409
    assert "late-1" in retry.json["error"]
    stored = await store.list_jobs("tenant-a", None, 10)
    assert [job.idempotency_key for job in stored] == ["late-1"]
    assert retry.json["jobId"] == stored[0].id  # the 409 names the job that was stored


async def test_detached_store_calls_are_capped_and_further_calls_fail_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    release = trio.Event()
    calls = BoundedCalls(1.0, max_detached=2)

    async def hang() -> int:
        await release.wait()
        return 1

    async with trio.open_nursery() as nursery:
        calls.attach(nursery)
        for _ in range(2):
            with pytest.raises(StoreError, match="did not answer within 1s"):
                await calls.call(hang)
        assert calls.detached == 2
        started = trio.current_time()
        with pytest.raises(StoreError, match="2 calls still pending"):
            await calls.call(hang)
        assert trio.current_time() == started
        release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert calls.detached == 0
        assert await calls.call(hang) == 1


async def test_bounded_call_passes_results_and_errors_through_unchanged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls = BoundedCalls(1.0)

    async def fail() -> None:
        await trio.lowlevel.checkpoint()
        raise LookupError("no such job")

    async def double(x: int) -> int:
        await trio.lowlevel.checkpoint()
        return 2 * x

    async with trio.open_nursery() as nursery:
        calls.attach(nursery)
        assert await calls.call(double, 21) == 42
        with pytest.raises(LookupError, match="no such job"):
            await calls.call(fail)
    assert calls.detached == 0


async def test_bounded_calls_without_a_serving_app_fail_as_store_unavailable() -> None:
    with pytest.raises(StoreError, match="not serving"):
        await BoundedCalls(1.0).call(trio.sleep, 0)


# ------------------------------------------------------------------ lone surrogates

SURROGATE = "\ud800x"
#: A cron template's schedule settings that are strings.
POLICY_STRINGS = (
    "timezone",
    "dstGap",
    "dstFold",
    "catchUp",
    "catchUpWindow",
    "jitter",
    "overlap",
)


def _with_surrogate(path: str) -> dict[str, Any]:
    """The contract's example body with SURROGATE placed at ``path``."""
    body = create_body(payload={"message": "hello", "nested": {"list": ["ok", {"k": "v"}]}})
    if path == "payload key":
        body["payload"][SURROGATE] = "value"
    elif path == "payload value":
        body["payload"]["message"] = SURROGATE
    elif path == "nested payload key":
        body["payload"]["nested"]["list"][1] = {SURROGATE: 1}
    elif path == "nested payload value":
        body["payload"]["nested"]["list"][0] = SURROGATE
    elif path == "cron":
        body.pop("scheduledAt")
        body["cron"] = "0 2 * * *" + SURROGATE
    elif path in POLICY_STRINGS:
        body.pop("scheduledAt")
        body["cron"] = "0 2 * * *"
        body[path] = SURROGATE
    else:
        body[path] = SURROGATE if path != "scheduledAt" else "2026-09-29T18:00:00Z" + SURROGATE
    return body


SURROGATE_PLACES = [
    "idempotencyKey",
    "tenantId",
    "jobType",
    "scheduledAt",
    "cron",
    "payload key",
    "payload value",
    "nested payload key",
    "nested payload value",
    *POLICY_STRINGS,
]


@pytest.mark.parametrize("place", SURROGATE_PLACES)
async def test_lone_surrogate_in_any_string_of_a_create_is_400_and_stores_nothing(
    api: Api, store: JobStore, place: str
) -> None:
    # Bug: "\ud800" in tenantId, a key or the payload answered 500 (a
    # UnicodeEncodeError in the SQLite insert). JSON's \u escapes let any client send it.
    data = json.dumps(_with_surrogate(place)).encode()
    assert b"\\ud800" in data
    reply = await api.request(
        "POST", "/jobs", data=data, headers={"Content-Type": "application/json"}
    )
    reply.assert_error(400)
    assert await store.list_jobs("tenant-a", None, 10) == []


@pytest.mark.parametrize(
    "tenant", ["tenant\x00a", "tenant\na", "tenant\x1fa", "\t"], ids=["nul", "lf", "us", "tab"]
)
async def test_control_character_in_list_tenant_id_is_400_like_in_a_create_body(
    api: Api, tenant: str
) -> None:
    (await api.get("/jobs", tenantId=tenant)).assert_error(400)
    (await api.create(create_body(tenantId=tenant))).assert_error(400)


async def test_store_calls_of_one_request_share_one_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Regression (fault suite, store freeze with keys): a create's key lookup, quota count,
    insert and audit write were bounded one by one, so together they ran past a client's 5 s
    timeout. Inside one request they now share API_STORE_TIMEOUT."""
    calls = BoundedCalls(2.0)
    app = QuartTrio(__name__)

    async def slow() -> int:
        await trio.sleep(1.5)
        return 1

    async with trio.open_nursery() as nursery:
        calls.attach(nursery)
        async with app.test_request_context("/jobs", method="POST"):
            started = trio.current_time()
            assert await calls.call(slow) == 1
            with pytest.raises(StoreError, match="did not answer within 2s"):
                await calls.call(slow)
            assert trio.current_time() - started == pytest.approx(2.0)
        # Outside a request, and with per_request=False, each call gets the whole bound.
        assert await calls.call(slow) == 1
        assert await calls.call(slow) == 1
        paged = BoundedCalls(2.0, per_request=False)
        paged.attach(nursery)
        async with app.test_request_context("/jobs", method="POST"):
            assert await paged.call(slow) == 1
            assert await paged.call(slow) == 1
        nursery.cancel_scope.cancel()
