"""``POST /jobs`` that succeeds or conflicts: the 201 with the full raw job (one-off and
cron template), defaults, the request log, the injected clock's timestamps, and the 409 of
a reused idempotency key (also under fifty concurrent creates).

Runs through the ``api`` fixture of ``conftest.py``, both ways (``[fast]``/``[quart]``).
"""

from __future__ import annotations

import logging
from datetime import datetime

import pytest
import trio

from jobscheduler.clock import ManualClock
from jobscheduler.domain.model import Status
from jobscheduler.store import JobStore

from .api_support import JSON, Api, Reply, create_body, serve
from .conftest import BASE, DEFAULT_SCHEDULE_JSON, DepsFactory


async def test_create_one_off_returns_201_with_the_full_raw_job(api: Api, store: JobStore) -> None:
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
    """Regression: the per-create line moved from INFO to DEBUG (it cost more than the
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
        **DEFAULT_SCHEDULE_JSON,
        "nextFireLocal": "2026-01-01T02:00:00+00:00",
        "attempts": 0,
        "maxAttempts": 3,
        "createdAt": "2026-01-01T00:00:00Z",
        "updatedAt": "2026-01-01T00:00:00Z",
    }


async def test_reused_idempotency_key_is_409_and_stores_nothing_new(
    api: Api, store: JobStore
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
    api: Api, store: JobStore
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


async def test_created_job_is_stamped_with_the_injected_clock(
    make_deps: DepsFactory,
) -> None:
    clock = ManualClock(BASE)
    clock.advance(90.5)
    async with serve(make_deps(clock=clock)) as api:
        body = (await api.create(create_body())).json
    assert body["createdAt"] == "2026-01-01T00:01:30.500Z"
    assert datetime.fromisoformat(body["updatedAt"].replace("Z", "+00:00")) == clock.now()
