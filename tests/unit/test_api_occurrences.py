"""``GET /jobs/{id}/occurrences``: a template's ledger through the API, newest first, with
each run's outcome read at request time, cursor pages with a ``Link`` header, and 400/404
for bad input or another tenant's template; ``paused`` skips recorded by a resume, and the
run a ``cancel_previous`` fire time cancelled."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import attrs
import pytest
from quart import g

from jobscheduler.api import create_app
from jobscheduler.clock import ManualClock
from jobscheduler.domain.cron import CronPolicy, Occurrence, OccurrenceStatus, SkipReason
from jobscheduler.domain.keys import Principal, Role
from jobscheduler.domain.model import Job, Status, new_job_id
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore

from .api_support import Api, api_deps, create_body, serve
from .conftest import DepsFactory, after, make_job


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(api_deps(make_deps)) as served:
        yield served


async def paris_template(store: JobStore, tenant: str = "tenant-a") -> Job:
    tmpl = attrs.evolve(
        make_job(key=f"tmpl-{tenant}", tenant=tenant, cron="*/5 * * * *"),
        cron_policy=CronPolicy(timezone="Europe/Paris"),
    )
    return await store.insert(tmpl)


def record(tmpl: Job, seconds: int, status: OccurrenceStatus, **kw: Any) -> Occurrence:
    return Occurrence(
        template_id=tmpl.id,
        tenant_id=tmpl.tenant_id,
        fire_at=after(seconds),
        status=status,
        recorded_at=after(seconds + kw.pop("late", 0)),
        **kw,
    )


async def test_items_are_newest_first_with_reasons_lateness_and_the_runs_outcome(
    api: Api, store: JobStore
) -> None:
    tmpl = await paris_template(store)
    done = await store.insert(
        attrs.evolve(make_job(key="run-0"), status=Status.COMPLETED, attempts=1)
    )
    buffered_run = await store.insert(
        attrs.evolve(make_job(key="run-600", created_at=after(700)), status=Status.RUNNING)
    )
    await store.record_occurrences(
        [
            record(tmpl, 0, OccurrenceStatus.SPAWNED, run_id=done.id, late=2),
            record(tmpl, 300, OccurrenceStatus.SKIPPED, reason=SkipReason.OVERLAP),
            record(tmpl, 600, OccurrenceStatus.BUFFERED, run_id=buffered_run.id),
            record(tmpl, 900, OccurrenceStatus.BUFFERED, run_id=new_job_id()),
        ]
    )
    reply = await api.get(f"/jobs/{tmpl.id}/occurrences")
    assert reply.status == 200, reply.text
    body = reply.json
    assert body["id"] == tmpl.id
    assert "nextCursor" not in body
    not_yet, buffered, skipped, spawned = body["occurrences"]
    assert spawned == {
        "fireAt": "2026-01-01T00:00:00Z",
        "fireAtLocal": "2026-01-01T01:00:00+01:00",
        "status": "spawned",
        "runId": done.id,
        "spawnedAt": "2026-01-01T00:00:02Z",
        "lateSeconds": 2.0,
        "run": {"status": "completed", "attempts": 1},
    }
    assert skipped == {
        "fireAt": "2026-01-01T00:05:00Z",
        "fireAtLocal": "2026-01-01T01:05:00+01:00",
        "status": "skipped",
        "reason": "overlap",
    }
    assert buffered["run"] == {"status": "running", "attempts": 0}
    assert (buffered["spawnedAt"], buffered["lateSeconds"]) == ("2026-01-01T00:11:40Z", 100.0)
    # Held, its run not spawned yet: no run, no spawn time.
    assert set(not_yet) == {"fireAt", "fireAtLocal", "status", "runId"}


async def test_pages_follow_the_cursor_and_the_link_header(api: Api, store: JobStore) -> None:
    tmpl = await paris_template(store)
    await store.record_occurrences(
        [
            record(tmpl, s, OccurrenceStatus.SKIPPED, reason=SkipReason.MISSED)
            for s in range(0, 3000, 300)
        ]
    )
    seen: list[str] = []
    path = f"/jobs/{tmpl.id}/occurrences?limit=4"
    while True:
        response = await api.client.get(path, headers={"Authorization": f"Bearer {api.token}"})
        assert response.status_code == 200
        body = await response.get_json()
        seen += [item["fireAt"] for item in body["occurrences"]]
        link = response.headers.get("Link")
        if "nextCursor" not in body:
            assert link is None
            break
        assert link is not None
        assert link.endswith('>; rel="next"')
        path = link[1 : link.index(">")]
        assert f"cursor={body['nextCursor']}" in path
    expected = [after(s) for s in range(2700, -1, -300)]
    assert seen == [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in expected]


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ({"limit": "0"}, "limit: must be between 1 and 500"),
        ({"limit": "ten"}, "limit: must be an integer"),
        ({"cursor": "not-a-cursor"}, "cursor: not a cursor"),
        ({"cursor": "Zjp4"}, "cursor: not a cursor"),  # "f:x"
    ],
)
async def test_bad_query_arguments_are_400(
    api: Api, store: JobStore, query: dict[str, str], fragment: str
) -> None:
    tmpl = await paris_template(store)
    (await api.get(f"/jobs/{tmpl.id}/occurrences", **query)).assert_error(400, fragment)


async def test_unknown_ids_one_offs_and_bad_ids_are_404_400_400(api: Api, store: JobStore) -> None:
    one_off = await store.insert(make_job(key="one-off"))
    (await api.get(f"/jobs/{new_job_id()}/occurrences")).assert_error(404)
    (await api.get(f"/jobs/{one_off.id}/occurrences")).assert_error(400, "not a cron template")
    (await api.get("/jobs/nope/occurrences")).assert_error(400, "ObjectId")


async def test_another_tenants_template_is_a_404_like_a_missing_one(
    make_deps: DepsFactory, store: JobStore
) -> None:
    theirs = await paris_template(store, tenant="tenant-b")
    app = create_app(api_deps(make_deps))

    @app.before_request
    async def as_tenant_a_reader() -> None:
        g.principal = Principal(key_id="key-a", tenant="tenant-a", role=Role.READER)

    async with app.test_app() as test_app:
        response = await test_app.test_client().get(f"/jobs/{theirs.id}/occurrences")
        assert response.status_code == 404
        assert await response.get_json() == {"error": f"job {theirs.id} not found"}


def test_lateness_is_never_negative() -> None:
    tmpl = make_job(cron="* * * * *")
    early = record(tmpl, 60, OccurrenceStatus.SPAWNED, run_id=new_job_id(), late=-1)
    assert early.lateness == timedelta(0)


@pytest.mark.parametrize(
    "raw", ["%ED%A0%80x", "f%3A%00", "%C3%A9", "%FF"], ids=["surrogate", "nul", "latin", "not-utf8"]
)
async def test_odd_bytes_in_the_cursor_are_400(api: Api, store: JobStore, raw: str) -> None:
    tmpl = await paris_template(store)
    reply = await api.request("GET", f"/jobs/{tmpl.id}/occurrences?cursor={raw}")
    reply.assert_error(400, "cursor")


async def test_fire_times_passed_while_paused_appear_as_paused_skips_after_resume(
    api: Api,
) -> None:
    created = await api.create(create_body(scheduledAt=None, cron="0 * * * *"))
    assert created.status == 201, created.text
    tid = created.json["id"]
    assert created.json["scheduledAt"] == "2026-01-01T01:00:00Z"
    assert (await api.request("POST", f"/jobs/{tid}/pause")).status == 200
    clock = api.deps.clock
    assert isinstance(clock, ManualClock)
    clock.advance(3 * 3600 + 60)  # 01:00, 02:00 and 03:00 pass while paused
    resumed = await api.request("POST", f"/jobs/{tid}/resume")
    assert resumed.json["scheduledAt"] == "2026-01-01T04:00:00Z"

    items = (await api.get(f"/jobs/{tid}/occurrences")).json["occurrences"]
    assert [(i["fireAt"], i["status"], i.get("reason")) for i in items] == [
        (f"2026-01-01T0{h}:00:00Z", "skipped", "paused") for h in (3, 2, 1)
    ]


async def test_a_template_with_cancel_previous_shows_the_run_each_fire_time_cancelled(
    api: Api,
) -> None:
    created = await api.create(
        create_body(scheduledAt=None, cron="0 * * * *", overlap="cancel_previous")
    )
    assert created.status == 201, created.text
    assert created.json["overlap"] == "cancel_previous"
    clock = api.deps.clock
    assert isinstance(clock, ManualClock)
    scheduler = Scheduler(api.deps)
    for _ in range(2):  # 01:00 spawns; at 02:00 that run has not finished
        clock.advance(3600)
        await scheduler.tick()

    items = (await api.get(f"/jobs/{created.json['id']}/occurrences")).json["occurrences"]
    newest, oldest = items
    assert "cancelledRunId" not in oldest
    assert oldest["run"]["status"] == "cancelled"
    assert newest["cancelledRunId"] == oldest["runId"]
    assert newest["run"]["status"] == "queued"
