"""``GET /jobs`` sorted by created or due time in both directions, searched by idempotency
key (exact or prefix), and the bulk filters' ``ids`` and ``dryRun`` (the dashboard's
selection and confirmation counts). Also: the SQLite plans of these listings walk an index
in order (no scan, no sort of the matches), so a page stays fast at 100,000 jobs."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs
import pytest

from jobscheduler.domain.model import Status
from jobscheduler.store import JobStore
from jobscheduler.store.query import Cursor, JobQuery, Sort
from jobscheduler.store.sqlite.codec import _SELECT, _millis
from jobscheduler.store.sqlite.query import find_sql

from .api_support import Api, api_deps, jobs_in_every_sort, post, serve
from .conftest import BASE, DepsFactory, make_job, started_sqlite
from .test_api_manage import dead


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(api_deps(make_deps)) as served:
        yield served


async def walk(api: Api, **query: str) -> list[str]:
    """Every page of ``GET /jobs`` through its Link headers: the ids in order."""
    seen: list[str] = []
    params: dict[str, str] = {"tenantId": "tenant-a", "limit": "2", **query}
    while True:
        response = await api.client.get(
            "/jobs", query_string=params, headers={"Authorization": f"Bearer {api.token}"}
        )
        assert response.status_code == 200, await response.get_data()
        seen += [j["id"] for j in await response.get_json()]
        link = response.headers.get("Link")
        if link is None:
            return seen
        match = re.fullmatch(r'<(/jobs\?[^>]+)>; rel="next"', link)
        assert match, link
        params = {k: v[0] for k, v in parse_qs(urlsplit(match.group(1)).query).items()}


async def test_each_sort_order_pages_through_every_job_once(api: Api, store: JobStore) -> None:
    orders = await jobs_in_every_sort(store)
    assert await walk(api) == orders["-createdAt"]
    for sort, order in orders.items():
        assert await walk(api, sort=sort) == order, sort


async def test_a_cursor_is_refused_under_another_sort(api: Api, store: JobStore) -> None:
    for _ in range(3):
        await store.insert(make_job())
    response = await api.client.get(
        "/jobs",
        query_string={"tenantId": "tenant-a", "limit": "1", "sort": "scheduledAt"},
        headers={"Authorization": f"Bearer {api.token}"},
    )
    cursor = parse_qs(urlsplit(response.headers["Link"][1:].split(">")[0]).query)["cursor"][0]
    reply = await api.get("/jobs", tenantId="tenant-a", cursor=cursor)
    reply.assert_error(400, "made for sort=scheduledAt")
    reply = await api.get("/jobs", tenantId="tenant-a", sort="scheduledAt", cursor=cursor)
    assert reply.status == 200, reply.text


async def test_search_by_exact_key_or_key_prefix(api: Api, store: JobStore) -> None:
    runs = [await store.insert(make_job(key=f"nightly-run-{i}")) for i in range(3)]
    await store.insert(make_job(key="weekly"))
    ids = lambda reply: {j["id"] for j in reply.json}  # noqa: E731
    reply = await api.get("/jobs", tenantId="tenant-a", idempotencyKey="nightly-run-2")
    assert ids(reply) == {runs[2].id}
    reply = await api.get("/jobs", tenantId="tenant-a", idempotencyKeyPrefix="nightly-")
    assert ids(reply) == {j.id for j in runs}
    reply = await api.get(
        "/jobs", tenantId="tenant-a", idempotencyKey="weekly", idempotencyKeyPrefix="w"
    )
    reply.assert_error(400, "not both")


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ({"sort": "id"}, "accepted: -createdAt, createdAt, -scheduledAt, scheduledAt"),
        ({"sort": "priority"}, "sort: unknown order"),
        ({"idempotencyKey": ""}, "idempotencyKey: must be a non-empty string"),
        ({"idempotencyKeyPrefix": "a\x01"}, "control characters"),
    ],
)
async def test_bad_sorts_and_searches_are_400s(
    api: Api, query: dict[str, str], fragment: str
) -> None:
    (await api.get("/jobs", tenantId="tenant-a", **query)).assert_error(400, fragment)


async def test_bulk_retry_of_a_selection_touches_only_the_named_ids(
    api: Api, store: JobStore
) -> None:
    failed = [await dead(store) for _ in range(3)]
    chosen = [failed[0].id, failed[2].id]
    body: dict[str, Any] = {"filter": {"tenantId": "tenant-a", "ids": chosen}}
    reply = await post(api, "/jobs/retry", {**body, "dryRun": True})
    assert reply.json == {"matched": 2, "changed": 0, "cancelRequested": 0, "dryRun": True}
    assert [(await store.get(j.id)).status for j in failed] == [Status.DLQ] * 3
    reply = await post(api, "/jobs/retry", body)
    assert reply.json == {"matched": 2, "changed": 2, "cancelRequested": 0}
    statuses = [(await store.get(j.id)).status for j in failed]
    assert statuses == [Status.PENDING, Status.DLQ, Status.PENDING]


async def test_bulk_cancel_dry_run_counts_what_it_would_touch_and_changes_nothing(
    api: Api, store: JobStore
) -> None:
    waiting = [await store.insert(make_job(key=f"batch-{i}")) for i in range(4)]
    await store.insert(make_job(key="other"))
    body: dict[str, Any] = {"filter": {"tenantId": "tenant-a", "idempotencyKeyPrefix": "batch-"}}
    reply = await post(api, "/jobs/cancel", {**body, "dryRun": True})
    assert (reply.json["matched"], reply.json["changed"]) == (4, 0)
    assert {(await store.get(j.id)).status for j in waiting} == {Status.PENDING}
    assert (await post(api, "/jobs/cancel", body)).json["changed"] == 4


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"filter": {"ids": []}}, "filter.ids: must be a non-empty array"),
        ({"filter": {"ids": ["nope"]}}, "24-character hex"),
        ({"filter": {"ids": ["a" * 24] * 1001}}, "at most 1000 ids"),
        ({"filter": {"status": "dlq"}, "dryRun": "yes"}, "dryRun: must be true or false"),
    ],
)
async def test_bulk_ids_and_dry_run_are_validated(api: Api, body: Any, fragment: str) -> None:
    (await post(api, "/jobs/retry", body)).assert_error(400, fragment)


@pytest.mark.parametrize("sort", list(Sort))
@pytest.mark.parametrize("statuses", [(), (Status.DLQ,), (Status.DLQ, Status.CANCELLED)])
async def test_sqlite_listing_plans_walk_an_index_in_order(
    tmp_path: Path, sort: Sort, statuses: tuple[Status, ...]
) -> None:
    store = await started_sqlite(tmp_path / "jobs.db")
    try:
        query = JobQuery(tenant_id="t", statuses=statuses, sort=sort)
        conn = sqlite3.connect(tmp_path / "jobs.db")
        for after in (None, Cursor(at=BASE, id="a" * 24, sort=sort)):
            sql, params = find_sql(query, 50, after, select=_SELECT, millis=_millis)
            plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            assert len(plan) == 1, plan
            assert plan[0].startswith("SEARCH jobs USING INDEX jobs_tenant"), plan
        conn.close()
    finally:
        await store.close()


async def test_sqlite_lists_a_tenants_templates_from_their_own_index(tmp_path: Path) -> None:
    store = await started_sqlite(tmp_path / "jobs.db")
    try:
        query = JobQuery(tenant_id="t", cron=True)
        sql, params = find_sql(query, 1000, None, select=_SELECT, millis=_millis)
        conn = sqlite3.connect(tmp_path / "jobs.db")
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        conn.close()
        assert plan == ["SEARCH jobs USING INDEX jobs_tenant_templates (tenant_id=?)"]
    finally:
        await store.close()


def test_a_query_matches_keys_and_ids_in_python_as_the_stores_do() -> None:
    job = make_job(key="nightly-run-1")
    base = JobQuery(tenant_id="tenant-a")
    assert attrs.evolve(base, key_prefix="nightly-").matches(job)
    assert not attrs.evolve(base, key_prefix="weekly").matches(job)
    assert attrs.evolve(base, idempotency_key="nightly-run-1", ids=(job.id,)).matches(job)
    assert not attrs.evolve(base, ids=("b" * 24,)).matches(job)


async def test_finished_before_lists_the_jobs_a_retention_is_about_to_prune(
    api: Api, store: JobStore
) -> None:
    old = make_job(status=Status.COMPLETED, created_at=BASE - timedelta(days=9))
    await store.insert(old)
    await store.insert(make_job(status=Status.COMPLETED, created_at=BASE - timedelta(days=1)))
    await store.insert(make_job(created_at=BASE - timedelta(days=9)))
    reply = await api.get("/jobs", tenantId="tenant-a", finishedBefore="2025-12-25T00:00:00Z")
    assert [j["id"] for j in reply.json] == [old.id]
    assert reply.json[0]["finishedAt"] == "2025-12-23T00:00:00Z"
    bad = await api.get("/jobs", tenantId="tenant-a", finishedBefore="yesterday")
    bad.assert_error(400, "finishedBefore")
