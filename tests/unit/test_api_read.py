"""Reading jobs: ``GET /jobs/{id}`` (200, a malformed id is 400, an unknown one 404) and
``GET /jobs`` (a tenant's jobs newest first as a bare array, the status filter, the limit's
default, fallback and cap, and query parameters that are never parsed into operators).

Runs through the ``api`` fixture of ``conftest.py``, both ways (``[fast]``/``[quart]``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import trio

from jobscheduler.domain.model import Job, Status, new_job_id
from jobscheduler.store import JobStore
from jobscheduler.store.query import Cursor, JobQuery

from .api_support import JSON, Api, api_deps, serve
from .conftest import BASE, DepsFactory, ProxyStore, make_job


async def insert(store: JobStore, *jobs: Job) -> None:
    for job in jobs:
        await store.insert(job)


# ----------------------------------------------------------------------- GET /jobs/{id}


async def test_get_job_is_200_with_its_current_state(api: Api, store: JobStore) -> None:
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
    api: Api, store: JobStore
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
    api: Api, store: JobStore
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


async def test_list_filters_by_status(api: Api, store: JobStore) -> None:
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
    api: Api, store: JobStore, limit: str | None, count: int
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
    make_deps: DepsFactory, store: JobStore, limit: str, passed: int
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
    api: Api, store: JobStore
) -> None:
    await insert(store, make_job(), make_job(tenant="tenant-b"))
    reply = await api.get("/jobs", tenantId='{"$ne": null}')
    assert (reply.status, reply.json) == (200, [])
    # Bracket syntax is not parsed into an object either: there is no tenantId at all.
    (await api.get("/jobs", **{"tenantId[$ne]": "x"})).assert_error(400, "unknown query parameter")
