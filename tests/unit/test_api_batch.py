"""``POST /jobs/batch``, a job's ``result`` and ``GET /jobs/{id}/attempts``, through the app's
test client (the harness of ``api_support.py``)."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
import trio

from jobscheduler.api.routes.batch import MAX_BATCH
from jobscheduler.domain import states
from jobscheduler.domain.attempts import Failure
from jobscheduler.domain.model import Job, new_job_id
from jobscheduler.errors import StoreError
from jobscheduler.store import JobStore
from jobscheduler.store.base import InsertOutcome

from .api_support import JSON, Api, api_deps, create_body, serve
from .conftest import BASE, DepsFactory, ProxyStore, make_job


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(api_deps(make_deps)) as served:
        yield served


async def batch(api: Api, jobs: Any) -> Any:
    return await api.request("POST", "/jobs/batch", json={"jobs": jobs})


async def test_batch_answers_each_job_in_order_with_its_own_status(
    api: Api, store: JobStore
) -> None:
    holder = await api.create(create_body(idempotencyKey="taken"))
    reply = await batch(
        api,
        [
            create_body(idempotencyKey="b-1"),
            create_body(idempotencyKey="taken"),
            create_body(idempotencyKey="b-2", jobType="nope"),
            create_body(idempotencyKey="b-1", priority=9),
            "not an object",
            create_body(idempotencyKey="b-3", jobType="noop", payload=None),
        ],
    )
    assert reply.status == 200
    assert reply.content_type == JSON
    results = reply.json["results"]
    assert [r["status"] for r in results] == [201, 409, 400, 409, 400, 201]
    first = results[0]["job"]
    assert (first["idempotencyKey"], first["status"], first["attempts"]) == ("b-1", "pending", 0)
    assert results[1]["jobId"] == holder.json["id"]
    assert "taken" in results[1]["error"]
    assert "unknown job type 'nope'" in results[2]["error"]
    assert results[3]["jobId"] == first["id"]  # the first of a key in a batch wins
    assert results[4] == {"status": 400, "error": "request body must be a JSON object"}
    assert set(results[0]) == {"status", "job"}
    stored = await store.list_jobs("tenant-a", None, 10)
    assert sorted(j.idempotency_key for j in stored) == ["b-1", "b-3", "taken"]
    assert (await store.get(first["id"])).priority == 5


async def test_batch_of_the_maximum_size_stores_every_job(api: Api, store: JobStore) -> None:
    jobs = [
        {
            "idempotencyKey": f"k-{i}",
            "tenantId": "t",
            "jobType": "noop",
            "scheduledAt": "2026-01-01T00:00:00Z",
        }
        for i in range(MAX_BATCH)
    ]
    reply = await batch(api, jobs)
    assert reply.status == 200
    results = reply.json["results"]
    assert [r["status"] for r in results] == [201] * MAX_BATCH
    assert [r["job"]["idempotencyKey"] for r in results] == [f"k-{i}" for i in range(MAX_BATCH)]
    assert len(await store.list_jobs("t", None, 5000)) == MAX_BATCH


async def test_empty_batch_is_an_empty_answer(api: Api) -> None:
    reply = await batch(api, [])
    assert (reply.status, reply.json) == (200, {"results": []})


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ([create_body()], "must be a JSON object"),
        ({}, "jobs: must be an array"),
        ({"jobs": {"a": 1}}, "jobs: must be an array"),
        ({"jobs": [], "extra": 1}, "unknown field(s): extra"),
        ({"jobs": [create_body()] * (MAX_BATCH + 1)}, f"at most {MAX_BATCH}"),
    ],
    ids=["array", "no-jobs", "jobs-object", "extra-field", "too-many"],
)
async def test_batch_body_of_the_wrong_shape_is_400_and_stores_nothing(
    api: Api, store: JobStore, body: Any, fragment: str
) -> None:
    reply = await api.request("POST", "/jobs/batch", json=body)
    reply.assert_error(400, fragment)
    assert await store.list_jobs("tenant-a", None, 10) == []


async def test_batch_with_malformed_json_or_another_content_type_is_rejected(api: Api) -> None:
    reply = await api.request("POST", "/jobs/batch", data=b"{", headers={"Content-Type": JSON})
    reply.assert_error(400, "malformed JSON")
    data = json.dumps({"jobs": []}).encode()
    reply = await api.request(
        "POST", "/jobs/batch", data=data, headers={"Content-Type": "text/plain"}
    )
    reply.assert_error(415)


class BatchUnavailable(ProxyStore):
    async def insert_many(self, jobs: Any) -> list[InsertOutcome]:
        await trio.lowlevel.checkpoint()
        raise StoreError("connection refused: mongodb://10.0.0.5 (password=hunter2)")


async def test_batch_store_failure_is_503_without_internals(
    make_deps: DepsFactory, store: JobStore
) -> None:
    async with serve(api_deps(make_deps, BatchUnavailable(store))) as api:
        reply = await batch(api, [create_body()])
    message = reply.assert_error(503)
    assert "hunter2" not in message


async def test_batch_that_is_all_invalid_never_calls_the_store(
    make_deps: DepsFactory, store: JobStore
) -> None:
    async with serve(api_deps(make_deps, BatchUnavailable(store))) as api:
        reply = await batch(api, [create_body(jobType="nope")])
    assert reply.status == 200
    assert [r["status"] for r in reply.json["results"]] == [400]


# ---------------------------------------------------------------- result and attempts


async def run_to_completion(store: JobStore, job: Job, result: Any) -> Job:
    await store.insert(job)
    await store.claim_due(job.scheduled_at, 1)
    now = job.scheduled_at + timedelta(seconds=1)
    assert await store.apply(states.pick(job.id, worker="w-1", token="t", now=now))
    running = await store.apply(states.start(job.id, token="t", now=now))
    assert running is not None
    done = await store.apply(
        states.complete(running, token="t", now=now + timedelta(seconds=2), result=result)
    )
    assert done is not None
    return done


async def test_get_job_shows_its_result_and_template_id(api: Api, store: JobStore) -> None:
    template_id = new_job_id()
    job = make_job(scheduled_at=BASE, template_id=template_id)
    await run_to_completion(store, job, {"sent": 3, "to": ["a@example.com"]})
    reply = await api.get(f"/jobs/{job.id}")
    assert reply.status == 200
    body = reply.json
    assert body["result"] == {"sent": 3, "to": ["a@example.com"]}
    assert body["templateId"] == template_id
    assert (body["status"], body["attempts"]) == ("completed", 1)


async def test_job_without_result_or_template_omits_them(api: Api, store: JobStore) -> None:
    job = make_job(scheduled_at=BASE)
    await run_to_completion(store, job, None)
    body = (await api.get(f"/jobs/{job.id}")).json
    assert "result" not in body
    assert "templateId" not in body


async def test_attempts_sub_resource_lists_every_attempt(api: Api, store: JobStore) -> None:
    job = make_job(scheduled_at=BASE)
    await store.insert(job)
    await store.claim_due(BASE, 1)
    assert await store.apply(states.pick(job.id, worker="w-1", token="t1", now=BASE))
    running = await store.apply(states.start(job.id, token="t1", now=BASE))
    assert running is not None
    failure = Failure(
        type="ValueError", message="bad", traceback="Traceback ...\nValueError: bad\n"
    )
    failed_at = BASE + timedelta(seconds=1)
    assert await store.apply(states.fail(running, token="t1", now=failed_at, error=failure))

    reply = await api.get(f"/jobs/{job.id}/attempts")
    assert reply.status == 200
    assert reply.json == {
        "jobId": job.id,
        "attempts": [
            {
                "run": 0,
                "number": 1,
                "outcome": "failed",
                "worker": "w-1",
                "startedAt": "2026-01-01T00:00:00Z",
                "finishedAt": "2026-01-01T00:00:01Z",
                "errorType": "ValueError",
                "errorMessage": "bad",
                "traceback": "Traceback ...\nValueError: bad\n",
            }
        ],
    }
    # The job itself keeps `attempts` as the count.
    assert (await api.get(f"/jobs/{job.id}")).json["attempts"] == 1


async def test_attempts_of_a_job_never_run_are_empty(api: Api, store: JobStore) -> None:
    job = make_job()
    await store.insert(job)
    reply = await api.get(f"/jobs/{job.id.upper()}/attempts")
    assert reply.json == {"jobId": job.id, "attempts": []}


async def test_attempts_of_an_unknown_or_malformed_id_are_404_and_400(api: Api) -> None:
    (await api.get(f"/jobs/{new_job_id()}/attempts")).assert_error(404)
    (await api.get("/jobs/nope/attempts")).assert_error(400, "24-character hex")


async def test_batch_logs_one_summary_line(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    # Regression: the summary's fields once overwrote a LogRecord attribute ("created"),
    # which made the request a 500 after its jobs were stored.
    caplog.set_level(logging.DEBUG, logger="jobscheduler.api")
    reply = await batch(api, [create_body(), create_body(jobType="nope")])
    assert reply.status == 200
    [summary] = [r for r in caplog.records if r.getMessage() == "job batch created"]
    assert (summary.jobs, summary.stored, summary.rejected) == (2, 1, 1)  # type: ignore[attr-defined]
    [created] = [r for r in caplog.records if r.getMessage() == "job created"]
    assert created.tenant == "tenant-a"  # type: ignore[attr-defined]
