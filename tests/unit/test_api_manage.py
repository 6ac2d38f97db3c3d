"""The management routes through the app's test client: actions on one job (cancel, retry),
bulk actions, filtered and paged listing, stats; the cron template routes are in
test_api_manage_templates.py. The clock is a ManualClock at BASE (2026-01-01T00:00Z), so
times in responses are exact."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import trio
import trio.testing
from quart import g

from jobscheduler.api.routes.manage import BULK_PAGE_TIMEOUT
from jobscheduler.domain import states
from jobscheduler.domain.keys import Principal, Role
from jobscheduler.domain.model import Job, Status, new_job_id
from jobscheduler.store import JobStore

from .api_support import (
    Api,
    api_deps,
    create_body,
    fast_api,  # noqa: F401  (registers the ``api`` fixture)
    post,
    serve,
)
from .conftest import BASE, DepsFactory, make_job
from .test_api_reliability import hung_deps


async def running(store: JobStore, **kwargs: Any) -> Job:
    job = await store.insert(make_job(**kwargs))
    await store.claim_due(BASE, 100)
    await store.apply(states.pick(job.id, worker="w", token="tok", now=BASE))
    started = await store.apply(states.start(job.id, token="tok", now=BASE))
    assert started is not None
    return started


async def dead(store: JobStore, **kwargs: Any) -> Job:
    job = await running(store, max_attempts=1, **kwargs)
    failed = await store.apply(states.fail(job, token="tok", now=BASE, error="boom"))
    assert failed is not None
    return failed


# ----------------------------------------------------------------------------- cancel


async def test_cancel_of_a_pending_job_answers_the_cancelled_job_and_is_idempotent(
    api: Api,
) -> None:
    created = (await api.create(create_body())).json
    first = await post(api, f"/jobs/{created['id']}/cancel")
    assert first.status == 200, first.text
    assert first.json["status"] == "cancelled"
    again = await post(api, f"/jobs/{created['id']}/cancel")
    assert (again.status, again.json) == (200, first.json)


async def test_cancel_of_a_running_job_is_a_202_cancel_request(api: Api, store: JobStore) -> None:
    job = await running(store)
    reply = await post(api, f"/jobs/{job.id}/cancel")
    assert reply.status == 202, reply.text
    assert reply.json["status"] == "running"
    assert reply.json["cancelRequestedAt"] == "2026-01-01T00:00:00Z"
    assert (await post(api, f"/jobs/{job.id}/cancel")).status == 202  # idempotent


async def test_cancel_of_a_finished_job_is_a_409_naming_its_status(
    api: Api, store: JobStore
) -> None:
    job = await dead(store)
    reply = await post(api, f"/jobs/{job.id}/cancel")
    assert reply.status == 409
    assert reply.json == {
        "error": f"job {job.id} is dlq: a finished job cannot be cancelled",
        "jobId": job.id,
        "status": "dlq",
    }


@pytest.mark.parametrize("action", ["cancel", "retry", "pause", "resume", "trigger"])
async def test_actions_on_unknown_or_malformed_ids_are_404_and_400(api: Api, action: str) -> None:
    (await post(api, f"/jobs/{new_job_id()}/{action}")).assert_error(404, "not found")
    (await post(api, f"/jobs/nope/{action}")).assert_error(400, "ObjectId")


async def test_actions_need_a_writer_and_hide_other_tenants_jobs(
    make_deps: DepsFactory, store: JobStore
) -> None:
    deps = api_deps(make_deps)
    mine = await store.insert(make_job(tenant="tenant-a"))
    theirs = await store.insert(make_job(tenant="tenant-b"))
    async with serve(deps) as api:
        principal = Principal(key_id="k", tenant="tenant-a", role=Role.WRITER)
        api.client.app.before_request(lambda: setattr(g, "principal", principal))
        (await post(api, f"/jobs/{theirs.id}/cancel")).assert_error(404, "not found")
        assert (await post(api, f"/jobs/{mine.id}/cancel")).status == 200
        (await post(api, "/jobs/cancel", {"filter": {"tenantId": "tenant-b"}})).assert_error(403)
        principal = Principal(key_id="k", tenant="tenant-a", role=Role.READER)
        (await post(api, f"/jobs/{mine.id}/retry")).assert_error(403, "writer")
    assert (await store.get(theirs.id)).status is Status.PENDING


# ----------------------------------------------------------------------------- retry


async def test_retry_of_a_dead_job_with_a_new_payload_records_the_replay(
    api: Api, store: JobStore
) -> None:
    job = await dead(store, job_type="log-message", payload={"message": "old"})
    reply = await post(
        api,
        f"/jobs/{job.id}/retry",
        {"payload": {"message": "fixed"}, "scheduledAt": "2026-01-02T00:00:00Z"},
    )
    assert reply.status == 200, reply.text
    body = reply.json
    assert (body["status"], body["attempts"], body["payload"]) == (
        "pending",
        0,
        {"message": "fixed"},
    )
    assert body["scheduledAt"] == "2026-01-02T00:00:00Z"
    assert "lastError" not in body
    assert body["replays"] == [
        {
            "at": "2026-01-01T00:00:00Z",
            "previousStatus": "dlq",
            "previousError": "boom",
            "previousAttempts": 1,
            "run": 1,
        }
    ]
    # Pending now: a second retry is a clear 409, not a second replay.
    again = await post(api, f"/jobs/{job.id}/retry")
    assert (again.status, again.json["status"]) == (409, "pending")


async def test_retry_validates_its_body_like_a_create(api: Api, store: JobStore) -> None:
    job = await dead(store, job_type="log-message")
    (await post(api, f"/jobs/{job.id}/retry", {"payload": {"nope": 1}})).assert_error(400)
    (await post(api, f"/jobs/{job.id}/retry", {"payload": []})).assert_error(400, "payload")
    (await post(api, f"/jobs/{job.id}/retry", {"scheduledAt": "soon"})).assert_error(400)
    (await post(api, f"/jobs/{job.id}/retry", {"other": 1})).assert_error(400, "unknown field")
    assert (await store.get(job.id)).status is Status.DLQ


# ----------------------------------------------------------------------------- bulk


async def test_bulk_retry_changes_every_match_and_is_safe_to_repeat(
    api: Api, store: JobStore
) -> None:
    for i in range(7):
        await dead(store, job_type="email" if i % 2 else "noop")
    await dead(store, tenant="tenant-b")
    reply = await post(api, "/jobs/retry", {"filter": {"tenantId": "tenant-a", "jobType": "noop"}})
    assert reply.json == {"matched": 4, "changed": 4, "cancelRequested": 0}
    reply = await post(api, "/jobs/retry", {"filter": {"tenantId": "tenant-a", "jobType": "noop"}})
    assert reply.json == {"matched": 0, "changed": 0, "cancelRequested": 0}
    # Without a tenant, the operator (authentication off) acts on every tenant.
    reply = await post(api, "/jobs/retry", {"filter": {"status": ["dlq"]}})
    assert reply.json == {"matched": 4, "changed": 4, "cancelRequested": 0}


async def test_bulk_cancel_requests_running_jobs_and_leaves_templates_alone(
    api: Api, store: JobStore
) -> None:
    busy = await running(store)
    await store.insert(make_job())
    await store.insert(make_job(cron="0 * * * *"))
    reply = await post(api, "/jobs/cancel", {"filter": {"tenantId": "tenant-a"}})
    assert reply.json == {"matched": 2, "changed": 2, "cancelRequested": 1}
    assert (await store.get(busy.id)).cancel_requested_at == BASE
    reply = await post(api, "/jobs/cancel", {"filter": {"tenantId": "tenant-a"}})
    assert reply.json["changed"] == 0


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "filter is required"),
        ({"filter": {"status": "done"}}, "accepted: pending"),
        ({"filter": {"colour": "red"}}, "unknown field"),
        ({"filter": {"createdAfter": "yesterday"}}, "createdAfter"),
        (
            {"filter": {"createdBefore": "2026-12-02T09:00:00"}},
            "createdBefore 2026-12-02T09:00:00 has no time zone; add Z or +01:00",
        ),
        (
            {"filter": {}, "scheduledAt": "2026-12-02 09:00:00"},
            "scheduledAt 2026-12-02 09:00:00 has no time zone",
        ),
        ({"filter": {"cron": "yes"}}, "cron"),
        ({"filter": [], "x": 1}, "unknown field"),
    ],
)
async def test_bulk_filters_are_validated(api: Api, body: Any, fragment: str) -> None:
    (await post(api, "/jobs/retry", body)).assert_error(400, fragment)


# ----------------------------------------------------------------------------- reading


async def test_list_filters_and_rejects_unknown_parameters_and_statuses(
    api: Api, store: JobStore
) -> None:
    failed = await dead(store)
    email = await store.insert(make_job(job_type="email"))
    noop = await store.insert(make_job())
    ids = lambda reply: {j["id"] for j in reply.json}  # noqa: E731
    assert ids(await api.get("/jobs", tenantId="tenant-a", jobType="email")) == {email.id}
    reply = await api.request(
        "GET",
        "/jobs",
        query_string=[("tenantId", "tenant-a"), ("status", "dlq"), ("status", "pending")],
    )
    assert ids(reply) == {email.id, noop.id, failed.id}
    assert ids(await api.get("/jobs", tenantId="tenant-a", status="dlq,cancelled")) == {failed.id}
    assert ids(await api.get("/jobs", tenantId="tenant-a", status="failed")) == set()
    assert ids(await api.get("/jobs", tenantId="tenant-a", cron="false")) == {
        email.id,
        noop.id,
        failed.id,
    }
    (await api.get("/jobs", tenantId="tenant-a", order="id")).assert_error(
        400, "accepted: tenantId"
    )
    (await api.get("/jobs", tenantId="tenant-a", status="done")).assert_error(400, "cancelled")
    (await api.get("/jobs", tenantId="tenant-a", cursor="garbage")).assert_error(400, "cursor")
    (await api.get("/jobs", tenantId="tenant-a", templateId="x")).assert_error(400, "templateId")


async def test_list_pages_with_a_link_header_until_the_last_page(api: Api, store: JobStore) -> None:
    for _ in range(5):
        await store.insert(make_job())
    seen: list[str] = []
    query: dict[str, str] = {"tenantId": "tenant-a", "limit": "2"}
    pages = 0
    while True:
        response = await api.client.get(
            "/jobs", query_string=query, headers={"Authorization": f"Bearer {api.token}"}
        )
        pages += 1
        seen += [j["id"] for j in await response.get_json()]
        link = response.headers.get("Link")
        if link is None:
            break
        match = re.fullmatch(r'<(/jobs\?[^>]+)>; rel="next"', link)
        assert match, link
        query = {k: v[0] for k, v in parse_qs(urlsplit(match.group(1)).query).items()}
        assert query["tenantId"] == "tenant-a"
    assert pages == 3
    assert len(seen) == len(set(seen)) == 5


async def test_stats_reports_counts_lag_and_windows(api: Api, store: JobStore) -> None:
    await dead(store)
    await store.insert(make_job(scheduled_at=BASE - timedelta(seconds=90)))
    reply = await api.get("/stats", tenantId="tenant-a")
    assert reply.status == 200, reply.text
    body = reply.json
    assert body["byStatus"] == {"dlq": 1, "pending": 1}
    assert body["counts"] == {"dlq": {"noop": 1}, "pending": {"noop": 1}}
    assert body["queueLagSeconds"] == 90.0
    assert body["finished"]["1m"] == {"completed": 0, "failed": 1}
    (await api.get("/stats", tenantId="tenant-a", window="5m")).assert_error(400, "accepted")


async def test_a_bulk_action_on_a_hung_store_answers_503_once_a_page_times_out(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    deps = hung_deps(make_deps, store, tmp_path)
    async with serve(deps) as api:
        started = trio.current_time()
        reply = await post(api, "/jobs/retry", {"filter": {"tenantId": "tenant-a"}})
        elapsed = trio.current_time() - started
        deps.store.release.set()
    reply.assert_error(503)
    assert elapsed == pytest.approx(BULK_PAGE_TIMEOUT)
