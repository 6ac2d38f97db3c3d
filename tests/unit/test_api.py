"""The HTTP contract, through the app's test client (quart-trio, in process).

Successful responses are the raw resource; every error is ``{"error": "..."}`` with the
matching status and a JSON content type. The clock is a ManualClock at BASE, so times in
responses are exact.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, cast

import attrs
import pytest
import trio

from jobscheduler.api import MAX_BODY_BYTES, create_app
from jobscheduler.api.create import FastCreate
from jobscheduler.audit import AuditRecord
from jobscheduler.auth import Role
from jobscheduler.clock import ManualClock
from jobscheduler.errors import StoreError
from jobscheduler.keys import new_key
from jobscheduler.model import Job, Status, new_job_id
from jobscheduler.runtime import Deps
from jobscheduler.store import JobStore
from jobscheduler.store.query import Cursor, JobQuery
from jobscheduler.store.sqlite import SQLiteJobStore
from jobscheduler.tenancy import EXTENSION

from .conftest import BASE, DepsFactory, ProxyStore, make_job, sample

JSON = "application/json"


def create_body(**overrides: Any) -> dict[str, Any]:
    """The contract's example create request; ``None`` values remove a field."""
    body: dict[str, Any] = {
        "idempotencyKey": "test-job-1",
        "tenantId": "tenant-a",
        "jobType": "log-message",
        "payload": {"message": "hello from the scheduler"},
        "priority": 5,
        "scheduledAt": "2026-09-29T18:00:00Z",
        "maxAttempts": 3,
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


@attrs.define
class Reply:
    status: int
    content_type: str
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)

    def assert_error(self, status: int, fragment: str = "") -> str:
        """Assert a contract error response; returns its message."""
        assert self.status == status, self.text
        assert self.content_type == JSON
        body = self.json
        assert isinstance(body, dict)
        assert list(body) == ["error"]
        assert isinstance(body["error"], str)
        assert body["error"]
        assert fragment in body["error"]
        return str(body["error"])


@attrs.define
class Api:
    """The app under test and the deps it was built on."""

    deps: Deps
    client: Any
    #: The API key sent with every request (the app runs with AUTH=required).
    token: str = ""

    async def request(self, method: str, path: str, **kwargs: Any) -> Reply:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        response = await self.client.open(path, method=method, headers=headers, **kwargs)
        return Reply(
            status=response.status_code,
            content_type=response.content_type,
            text=await response.get_data(as_text=True),
        )

    async def create(self, body: Any) -> Reply:
        return await self.request("POST", "/jobs", json=body)

    async def get(self, path: str, **query: str) -> Reply:
        return await self.request("GET", path, query_string=query or None)


@asynccontextmanager
async def serve(deps: Deps, way: str = "fast") -> AsyncIterator[Api]:
    """The app on ``deps`` with AUTH=required, called with an admin key of every tenant.

    ``way`` is how ``POST /jobs`` is served: ``fast``, the key already cached so a create
    that succeeds takes the fast path (api/create.py) and any other goes on to Quart, or
    ``quart``, the app without its fast path (every create through Quart's route)."""
    deps = attrs.evolve(deps, settings=attrs.evolve(deps.settings, auth="required"))
    app = create_app(deps)
    if way == "quart":
        app.asgi_app = cast(FastCreate, app.asgi_app).app  # type: ignore[method-assign]
    async with app.test_app() as test_app:
        key, token = new_key(tenant=None, role=Role.ADMIN, name="test", now=BASE)
        await deps.store.insert_key(key)
        if way == "fast":
            await app.extensions[EXTENSION].authenticator.authenticate([f"Bearer {token}"])
        yield Api(deps=deps, client=test_app.test_client(), token=token)


def api_deps(make_deps: DepsFactory, store: JobStore | None = None) -> Deps:
    return make_deps(store=store, clock=ManualClock(BASE))


@pytest.fixture(params=["fast", "quart"])
async def api(make_deps: DepsFactory, request: pytest.FixtureRequest) -> AsyncIterator[Api]:
    async with serve(api_deps(make_deps), request.param) as served:
        yield served


async def insert(store: JobStore, *jobs: Job) -> None:
    for job in jobs:
        await store.insert(job)


# ----------------------------------------------------------------------- health


async def test_healthz_is_200_ok_in_plain_text(api: Api) -> None:
    reply = await api.get("/healthz")
    assert reply.status == 200
    assert reply.content_type.startswith("text/plain")
    assert reply.text == "ok"


# ----------------------------------------------------------------------- POST /jobs


async def test_create_one_off_returns_201_with_the_full_raw_job(
    api: Api, store: SQLiteJobStore
) -> None:
    reply = await api.create(create_body())
    assert reply.status == 201
    assert reply.content_type == JSON
    body = reply.json
    assert body == {
        "id": body["id"],
        "idempotencyKey": "test-job-1",
        "tenantId": "tenant-a",
        "jobType": "log-message",
        "payload": {"message": "hello from the scheduler"},
        "priority": 5,
        "status": "pending",
        "scheduledAt": "2026-09-29T18:00:00Z",
        "attempts": 0,
        "maxAttempts": 3,
        "createdAt": "2026-01-01T00:00:00Z",
        "updatedAt": "2026-01-01T00:00:00Z",
    }
    assert len(body["id"]) == 24
    int(body["id"], 16)
    stored = await store.get(body["id"])
    assert stored.status is Status.PENDING
    assert (await api.get(f"/jobs/{body['id']}")).json == body


async def test_create_logs_its_line_at_debug_only(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 13: the per-create line moved from INFO to DEBUG (it cost more than the
    insert); the request log stays available with LOG_LEVEL=DEBUG."""
    caplog.set_level(logging.INFO, logger="jobscheduler")
    first = await api.create(create_body())
    assert first.status == 201
    assert not [r for r in caplog.records if r.getMessage() == "job created"]

    caplog.set_level(logging.DEBUG, logger="jobscheduler")
    second = await api.create(create_body(idempotencyKey="test-job-2"))
    [line] = [r for r in caplog.records if r.getMessage() == "job created"]
    assert line.levelno == logging.DEBUG
    assert (line.job_id, line.tenant) == (second.json["id"], "tenant-a")  # type: ignore[attr-defined]


async def test_create_with_only_required_fields_applies_defaults(api: Api) -> None:
    reply = await api.create(
        {
            "idempotencyKey": "minimal",
            "tenantId": "tenant-a",
            "jobType": "noop",
            "scheduledAt": "2026-09-29T20:00:00+02:00",
        }
    )
    assert reply.status == 201
    body = reply.json
    assert (body["payload"], body["priority"], body["maxAttempts"]) == ({}, 0, 3)
    assert body["scheduledAt"] == "2026-09-29T18:00:00Z"
    assert "cron" not in body


async def test_create_cron_returns_201_template_with_computed_first_fire_time(
    api: Api,
) -> None:
    reply = await api.create(
        create_body(
            idempotencyKey="nightly-report",
            payload={"message": "nightly report run"},
            priority=None,
            scheduledAt=None,
            cron="0 2 * * *",
        )
    )
    assert reply.status == 201
    assert reply.content_type == JSON
    body = reply.json
    assert body == {
        "id": body["id"],
        "idempotencyKey": "nightly-report",
        "tenantId": "tenant-a",
        "jobType": "log-message",
        "payload": {"message": "nightly report run"},
        "priority": 0,
        "status": "pending",
        "scheduledAt": "2026-01-01T02:00:00Z",
        "cron": "0 2 * * *",
        "timezone": "UTC",
        "dstGap": "shift",
        "dstFold": "first",
        "catchUp": "one",
        "catchUpWindow": "1h",
        "overlap": "allow",
        "nextFireLocal": "2026-01-01T02:00:00+00:00",
        "attempts": 0,
        "maxAttempts": 3,
        "createdAt": "2026-01-01T00:00:00Z",
        "updatedAt": "2026-01-01T00:00:00Z",
    }


async def test_reused_idempotency_key_is_409_and_stores_nothing_new(
    api: Api, store: SQLiteJobStore
) -> None:
    # Keys are unique per tenant (tenancy): the same tenant reusing one is the conflict.
    first = await api.create(create_body())
    assert first.status == 201
    reply = await api.create(create_body(jobType="noop", payload=None))
    # The 409 names the job holding the key, so a retrying client can follow it.
    assert reply.status == 409
    assert reply.content_type == JSON
    assert list(reply.json) == ["error", "jobId"]
    assert "test-job-1" in reply.json["error"]
    assert reply.json["jobId"] == first.json["id"]
    assert len(await store.list_jobs("tenant-a", None, 10)) == 1


async def test_fifty_concurrent_creates_of_one_key_yield_exactly_one_201(
    api: Api, store: SQLiteJobStore
) -> None:
    replies: list[Reply] = []

    async def create(n: int) -> None:
        replies.append(await api.create(create_body(idempotencyKey="race", priority=n)))

    async with trio.open_nursery() as nursery:
        for n in range(50):
            nursery.start_soon(create, n)

    statuses = sorted(r.status for r in replies)
    assert statuses == [201] + [409] * 49
    [winner] = [r.json["id"] for r in replies if r.status == 201]
    for reply in replies:
        if reply.status == 409:
            assert "race" in reply.json["error"]
            assert reply.json["jobId"] == winner
    assert len(await store.list_jobs("tenant-a", None, 100)) == 1


VALIDATION_FAILURES: list[tuple[str, dict[str, Any], str]] = [
    ("missing-key", create_body(idempotencyKey=None), "idempotencyKey is required"),
    ("missing-tenant", create_body(tenantId=None), "tenantId is required"),
    ("missing-type", create_body(jobType=None), "jobType is required"),
    ("number-key", create_body(idempotencyKey=7), "idempotencyKey: must be a string"),
    ("empty-tenant", create_body(tenantId=""), "tenantId: must not be empty"),
    ("long-key", create_body(idempotencyKey="k" * 257), "longer than 256"),
    ("operator-tenant", create_body(tenantId={"$ne": None}), "tenantId: must be a string"),
    ("unknown-type", create_body(jobType="email"), "unknown job type"),
    ("payload-list", create_body(payload=[1]), "payload: must be a JSON object"),
    ("no-message", create_body(payload={}), "payload.message"),
    ("flaky-rate", create_body(jobType="flaky", payload={"failRate": 1.5}), "failRate"),
    ("flaky-bool", create_body(jobType="flaky", payload={"failRate": True}), "failRate"),
    ("slow-negative", create_body(jobType="slow", payload={"sleepMs": -1}), "sleepMs"),
    ("priority-fraction", create_body(priority=1.5), "priority"),
    ("priority-bool", create_body(priority=True), "priority"),
    ("attempts-string", create_body(maxAttempts="3"), "maxAttempts"),
    ("both-schedules", create_body(cron="0 2 * * *"), "either cron or scheduledAt"),
    ("no-schedule", create_body(scheduledAt=None), "scheduledAt is required"),
    ("cron-4-fields", create_body(scheduledAt=None, cron="* * * *"), "cron"),
    ("cron-6-fields", create_body(scheduledAt=None, cron="0 0 2 * * *"), "cron"),
    ("cron-macro", create_body(scheduledAt=None, cron="@daily"), "cron"),
    ("cron-range", create_body(scheduledAt=None, cron="61 * * * *"), "cron"),
    ("cron-feb-31", create_body(scheduledAt=None, cron="0 0 31 2 *"), "cron"),
    ("no-timezone", create_body(scheduledAt="2026-09-29T18:00:00"), "scheduledAt"),
    ("not-a-time", create_body(scheduledAt="tomorrow"), "scheduledAt"),
    ("unknown-field", create_body(status="completed"), "unknown field(s): status"),
]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [pytest.param(body, fragment, id=name) for name, body, fragment in VALIDATION_FAILURES],
)
async def test_invalid_create_request_is_400_with_a_json_error(
    api: Api, store: SQLiteJobStore, body: dict[str, Any], fragment: str
) -> None:
    (await api.create(body)).assert_error(400, fragment)
    assert await store.count_by_status() == dict.fromkeys(Status, 0)


@pytest.mark.parametrize("body", [[], "text", 5, None], ids=["array", "string", "number", "null"])
async def test_create_body_that_is_not_an_object_is_400(api: Api, body: Any) -> None:
    (await api.create(body)).assert_error(400, "must be a JSON object")


async def test_bug_scheduled_at_out_of_range_after_its_offset_is_500_instead_of_400(
    api: Api,
) -> None:
    # Bug: model.parse_time computes `local - offset` outside its try, so a well-formed
    # timestamp whose UTC equivalent is beyond datetime's range raises OverflowError and the
    # API answers 500 "internal error" instead of 400.
    reply = await api.create(create_body(scheduledAt="9999-12-31T23:59:59-01:00"))
    reply.assert_error(400, "scheduledAt")


@pytest.mark.parametrize(
    "data",
    [b"{", b"", b"{'idempotencyKey': 'x'}", b'{"a": 1,}', b"\xff\xfe\x00", b"[" * 50_000],
    ids=["unclosed", "empty", "single-quotes", "trailing-comma", "not-utf8", "too-deep"],
)
async def test_malformed_json_is_400(api: Api, data: bytes) -> None:
    reply = await api.request("POST", "/jobs", data=data, headers={"Content-Type": JSON})
    reply.assert_error(400, "malformed JSON")


async def test_nan_in_json_is_400(api: Api) -> None:
    data = json.dumps(create_body()).replace('"priority": 5', '"priority": NaN').encode()
    reply = await api.request("POST", "/jobs", data=data, headers={"Content-Type": JSON})
    reply.assert_error(400, "NaN is not allowed")


async def test_body_over_one_mebibyte_is_413(api: Api, store: SQLiteJobStore) -> None:
    body = create_body(payload={"message": "x", "filler": "y" * MAX_BODY_BYTES})
    data = json.dumps(body).encode()
    assert len(data) > MAX_BODY_BYTES
    reply = await api.request("POST", "/jobs", data=data, headers={"Content-Type": JSON})
    reply.assert_error(413, "larger than")
    assert await store.list_jobs("tenant-a", None, 10) == []


async def test_body_just_under_the_limit_is_accepted(api: Api) -> None:
    body = create_body(payload={"message": "x", "filler": ""})
    size = len(json.dumps(body).encode())
    body["payload"]["filler"] = "y" * (MAX_BODY_BYTES - size)
    data = json.dumps(body).encode()
    assert len(data) == MAX_BODY_BYTES
    reply = await api.request("POST", "/jobs", data=data, headers={"Content-Type": JSON})
    assert reply.status == 201


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/xml", "text/json"],
)
async def test_non_json_content_type_is_415(api: Api, content_type: str) -> None:
    data = json.dumps(create_body()).encode()
    reply = await api.request("POST", "/jobs", data=data, headers={"Content-Type": content_type})
    reply.assert_error(415, "application/json")


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "application/vnd.api+json"]
)
async def test_json_content_types_with_parameters_or_suffix_are_accepted(
    api: Api, content_type: str
) -> None:
    data = json.dumps(create_body()).encode()
    reply = await api.request("POST", "/jobs", data=data, headers={"Content-Type": content_type})
    assert reply.status == 201


# ----------------------------------------------------------------------- GET /jobs/{id}


async def test_get_job_is_200_with_its_current_state(api: Api, store: SQLiteJobStore) -> None:
    job = make_job(priority=2, payload={"a": 1})
    await store.insert(job)
    reply = await api.get(f"/jobs/{job.id}")
    assert reply.status == 200
    assert reply.content_type == JSON
    assert reply.json["id"] == job.id
    assert reply.json["status"] == "pending"
    assert reply.json["payload"] == {"a": 1}
    assert (await api.get(f"/jobs/{job.id.upper()}")).json["id"] == job.id


@pytest.mark.parametrize(
    "job_id",
    ["abc", "z" * 24, "0" * 23, "0" * 25, "66f9a1c2e4b0a3d5c8f12a0g", "%7B%22%24ne%22%3Anull%7D"],
    ids=["short", "not-hex", "23-chars", "25-chars", "one-bad-char", "operator"],
)
async def test_get_job_with_malformed_id_is_400(api: Api, job_id: str) -> None:
    (await api.get(f"/jobs/{job_id}")).assert_error(400, "24-character hex")


async def test_get_unknown_job_id_is_404(api: Api) -> None:
    (await api.get(f"/jobs/{new_job_id()}")).assert_error(404, "not found")


async def test_bug_job_id_with_a_trailing_newline_is_404_instead_of_400(
    api: Api, store: SQLiteJobStore
) -> None:
    # Bug: model.is_job_id matches r"^[0-9a-f]{24}$", and `$` also matches before a trailing
    # newline, so "<24 hex>\n" passes as well-formed and the API answers 404 (after a store
    # lookup) instead of 400 for a malformed id. (parse_time's regex has the same `$`, so
    # "2026-09-29T18:00:00Z\n" is accepted as a scheduledAt.) Use \Z or re.fullmatch.
    job = make_job()
    await store.insert(job)
    (await api.get(f"/jobs/{job.id}%0A")).assert_error(400, "24-character hex")


# ----------------------------------------------------------------------- GET /jobs


async def test_list_returns_the_tenants_jobs_newest_first_as_a_bare_array(
    api: Api, store: SQLiteJobStore
) -> None:
    jobs = [make_job(created_at=BASE + timedelta(seconds=s)) for s in (5, 1, 30, 10)]
    await insert(store, *jobs, make_job(tenant="tenant-b"))
    reply = await api.get("/jobs", tenantId="tenant-a")
    assert reply.status == 200
    assert reply.content_type == JSON
    assert isinstance(reply.json, list)
    order = sorted(jobs, key=lambda j: j.created_at, reverse=True)
    assert [item["id"] for item in reply.json] == [j.id for j in order]
    assert all(item["tenantId"] == "tenant-a" for item in reply.json)


async def test_list_of_a_tenant_without_jobs_is_an_empty_array(api: Api) -> None:
    reply = await api.get("/jobs", tenantId="nobody")
    assert (reply.status, reply.json) == (200, [])


async def test_list_without_tenant_id_is_400(api: Api) -> None:
    (await api.get("/jobs")).assert_error(400, "tenantId is required")
    (await api.get("/jobs", status="pending")).assert_error(400, "tenantId is required")


async def test_list_filters_by_status(api: Api, store: SQLiteJobStore) -> None:
    pending, dead = make_job(), make_job(status=Status.DLQ)
    await insert(store, pending, dead)
    reply = await api.get("/jobs", tenantId="tenant-a", status="dlq")
    assert [item["id"] for item in reply.json] == [dead.id]
    reply = await api.get("/jobs", tenantId="tenant-a", status="completed")
    assert reply.json == []


async def test_list_with_unknown_status_is_400(api: Api) -> None:
    (await api.get("/jobs", tenantId="tenant-a", status="done")).assert_error(400, "status")


@pytest.mark.parametrize(
    ("limit", "count"),
    [(None, 100), ("5", 5), ("101", 101), ("abc", 100), ("0", 100), ("-3", 100), ("1.5", 100)],
)
async def test_list_limit_defaults_to_100_and_invalid_limits_fall_back(
    api: Api, store: SQLiteJobStore, limit: str | None, count: int
) -> None:
    jobs = [make_job(created_at=BASE + timedelta(milliseconds=n)) for n in range(110)]
    async with trio.open_nursery() as nursery:
        for job in jobs:
            nursery.start_soon(store.insert, job)
    query = {"tenantId": "tenant-a"} | ({"limit": limit} if limit is not None else {})
    reply = await api.get("/jobs", **query)
    assert reply.status == 200
    assert len(reply.json) == count
    assert reply.json[0]["id"] == jobs[-1].id  # the newest ones


@pytest.mark.parametrize(("limit", "passed"), [("5000", 5000), ("5001", 5000), ("1e9", 100)])
async def test_list_limit_is_capped_at_5000(
    make_deps: DepsFactory, store: SQLiteJobStore, limit: str, passed: int
) -> None:
    limits: list[int] = []

    class RecordingStore(ProxyStore):
        async def find_jobs(
            self, query: JobQuery, n: int, after: Cursor | None = None
        ) -> list[Job]:
            limits.append(n)
            return await self.inner.find_jobs(query, n, after)

    async with serve(api_deps(make_deps, RecordingStore(store))) as api:
        assert (await api.get("/jobs", tenantId="t", limit=limit)).status == 200
        assert (await api.get("/jobs", tenantId="t", limit="999999999999")).status == 200
    assert limits == [passed, 5000]


async def test_operator_object_in_tenant_query_is_a_literal_tenant_that_matches_nothing(
    api: Api, store: SQLiteJobStore
) -> None:
    await insert(store, make_job(), make_job(tenant="tenant-b"))
    reply = await api.get("/jobs", tenantId='{"$ne": null}')
    assert (reply.status, reply.json) == (200, [])
    # Bracket syntax is not parsed into an object either: there is no tenantId at all.
    (await api.get("/jobs", **{"tenantId[$ne]": "x"})).assert_error(400, "unknown query parameter")


# ----------------------------------------------------------------------- routing errors


@pytest.mark.parametrize("path", ["/ui/nope", "/job", "/jobs/abc/extra", "/metrics", "/healthz/x"])
async def test_unknown_route_is_404_json(api: Api, path: str) -> None:
    (await api.get(path)).assert_error(404, "not found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/jobs/66f9a1c2e4b0a3d5c8f12a01"),
        ("POST", "/jobs/66f9a1c2e4b0a3d5c8f12a01"),
        ("PUT", "/jobs"),
        ("DELETE", "/jobs"),
        ("POST", "/healthz"),
    ],
)
async def test_wrong_method_is_405_json(api: Api, method: str, path: str) -> None:
    (await api.request(method, path)).assert_error(405, "method not allowed")


# ----------------------------------------------------------------------- store failures


#: A store error whose text must never reach a client (it names a host and a password).
UNREACHABLE = "connection refused: mongodb://10.0.0.5:27017 (password=hunter2)"


class UnavailableStore(ProxyStore):
    """Every call fails as an unreachable database would."""

    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        await trio.lowlevel.checkpoint()
        raise StoreError(UNREACHABLE)

    async def get(self, job_id: str) -> Job:
        await trio.lowlevel.checkpoint()
        raise StoreError(UNREACHABLE)

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        await trio.lowlevel.checkpoint()
        raise StoreError(UNREACHABLE)


class BrokenStore(ProxyStore):
    """Every call hits a programming error inside the adapter."""

    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        await trio.lowlevel.checkpoint()
        raise KeyError("secret_column")

    async def get(self, job_id: str) -> Job:
        await trio.lowlevel.checkpoint()
        raise ZeroDivisionError("secret detail")

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("secret detail")


REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/jobs", {"json": create_body()}),
    ("GET", f"/jobs/{'a' * 24}", {}),
    ("GET", "/jobs", {"query_string": {"tenantId": "tenant-a"}}),
]


@pytest.mark.parametrize(("method", "path", "kwargs"), REQUESTS, ids=["create", "get", "list"])
async def test_store_error_is_503_json_without_internals(
    make_deps: DepsFactory,
    store: SQLiteJobStore,
    method: str,
    path: str,
    kwargs: dict[str, Any],
) -> None:
    async with serve(api_deps(make_deps, UnavailableStore(store))) as api:
        reply = await api.request(method, path, **kwargs)
    message = reply.assert_error(503)
    assert "hunter2" not in message
    assert "mongodb://" not in message


@pytest.mark.parametrize(("method", "path", "kwargs"), REQUESTS, ids=["create", "get", "list"])
async def test_unexpected_exception_is_500_internal_error(
    make_deps: DepsFactory,
    store: SQLiteJobStore,
    method: str,
    path: str,
    kwargs: dict[str, Any],
) -> None:
    async with serve(api_deps(make_deps, BrokenStore(store))) as api:
        reply = await api.request(method, path, **kwargs)
    assert reply.status == 500
    assert reply.content_type == JSON
    assert reply.json == {"error": "internal error"}


# ----------------------------------------------------------------------- metrics


async def test_request_metrics_are_labelled_with_the_route_template_not_the_raw_path(
    api: Api, store: SQLiteJobStore
) -> None:
    job = make_job()
    await store.insert(job)
    await api.get(f"/jobs/{job.id}")
    await api.get(f"/jobs/{new_job_id()}")
    await api.get("/jobs", tenantId="tenant-a")
    await api.create(create_body())
    await api.get("/no/such/route")

    def count(method: str, route: str, status: str) -> float:
        labels = {"method": method, "route": route, "status": status}
        return sample(api.deps.metrics, "api_requests_total", labels)

    assert count("GET", "/jobs/<job_id>", "200") == 1
    assert count("GET", "/jobs/<job_id>", "404") == 1
    assert count("GET", "/jobs", "200") == 1
    assert count("POST", "/jobs", "201") == 1
    assert count("GET", "unmatched", "404") == 1
    assert count("GET", f"/jobs/{job.id}", "200") == 0
    routes = {
        s.labels["route"]
        for metric in api.deps.metrics.registry.collect()
        if metric.name == "api_requests"
        for s in metric.samples
    }
    assert routes == {"/jobs/<job_id>", "/jobs", "unmatched"}
    duration = "api_request_duration_seconds_count"
    assert sample(api.deps.metrics, duration, {"method": "GET", "route": "/jobs/<job_id>"}) == 2


async def test_created_job_is_stamped_with_the_injected_clock(
    make_deps: DepsFactory,
) -> None:
    clock = ManualClock(BASE)
    clock.advance(90.5)
    async with serve(make_deps(clock=clock)) as api:
        body = (await api.create(create_body())).json
    assert body["createdAt"] == "2026-01-01T00:01:30.500Z"
    assert datetime.fromisoformat(body["updatedAt"].replace("Z", "+00:00")) == clock.now()
