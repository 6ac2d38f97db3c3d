"""Schema-driven fuzzing of a live ``jobscheduler dev``: schemathesis reads ``/openapi.json``
and sends every operation valid and invalid requests; no answer may be a 5xx, and every
answer's status, content type, headers and body must be the ones the document declares.

Bounded: ``MAX_EXAMPLES`` per operation and generation mode, derandomised so a run repeats.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.dev_server import DevServer

pytestmark = pytest.mark.e2e

MAX_EXAMPLES = 40

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def fuzz(
    operation: schemathesis.APIOperation,
    mode: schemathesis.GenerationMode,
    headers: dict[str, str],
) -> None:
    """Send ``MAX_EXAMPLES`` generated requests of ``operation`` with ``headers`` (the dev
    server's admin key); raise on the first failure (hypothesis shrinks it first)."""

    @given(operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=CHECKS, headers=headers)

    run()


def test_answers_about_existing_jobs_match_the_declared_schemas(live_dev: DevServer) -> None:
    """Random ids rarely exist: create a one-off job and a template, then check the answers
    about them (get, list, next fire times, a duplicate's 409) against the document."""
    schema = schemathesis.openapi.from_url(f"{live_dev.url}/openapi.json")
    one_off = {
        "idempotencyKey": "fuzz-seed-1",
        "tenantId": "fuzz",
        "jobType": "noop",
        "scheduledAt": "2020-01-01T00:00:00Z",
    }
    template = {"idempotencyKey": "fuzz-seed-2", "tenantId": "fuzz", "jobType": "noop"}
    template |= {"cron": "*/5 * * * *", "timezone": "Europe/Paris", "jitter": "30s"}
    ids = []
    for body in (one_off, template):
        create = schema["/jobs"]["POST"]
        case = create.Case(body=body, media_type="application/json")
        response = case.call_and_validate(checks=CHECKS, headers=live_dev.auth_headers)
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
        duplicate = create.Case(body=body, media_type="application/json")
        response = duplicate.call_and_validate(checks=CHECKS, headers=live_dev.auth_headers)
        assert response.status_code == 409
        assert response.json()["jobId"] == ids[-1]
    for job_id in ids:
        case = schema["/jobs/{job_id}"]["GET"].Case(path_parameters={"job_id": job_id})
        assert (
            case.call_and_validate(checks=CHECKS, headers=live_dev.auth_headers).status_code == 200
        )
    case = schema["/jobs/{job_id}/next"]["GET"].Case(
        path_parameters={"job_id": ids[1]}, query={"count": 3}
    )
    assert (
        len(
            case.call_and_validate(checks=CHECKS, headers=live_dev.auth_headers).json()["fireTimes"]
        )
        == 3
    )
    listing = schema["/jobs"]["GET"].Case(query={"tenantId": "fuzz", "limit": 1})
    assert len(listing.call_and_validate(checks=CHECKS, headers=live_dev.auth_headers).json()) == 1


def test_every_operation_answers_within_its_declared_contract(live_dev: DevServer) -> None:
    # schemathesis' pytest plugin does not load under pytest 9; its Python API does.
    schema = schemathesis.openapi.from_url(f"{live_dev.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    document = httpx.get(f"{live_dev.url}/openapi.json").json()
    declared = {f"{m.upper()} {path}" for path, item in document["paths"].items() for m in item}
    # schemathesis leaves out the document's own path; every other operation is fuzzed.
    assert {op.label for op in operations} == declared - {"GET /openapi.json"}
    failures: list[str] = []
    for operation in operations:
        for mode in schemathesis.GenerationMode:
            try:
                fuzz(operation, mode, live_dev.auth_headers)
            except Unsatisfiable:
                # An operation without inputs (GET /healthz) has no invalid request to send.
                assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
            except Exception as exc:  # collect every operation's failure, not only the first
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)


def test_answers_of_the_manage_actions_on_existing_jobs_match_the_declared_schemas(
    live_dev: DevServer,
) -> None:
    """Random ids rarely exist: act on seeded jobs (cancel, retry, a final job's 409, bulk
    actions, pause/resume/trigger/update/delete of a template, attempts, stats) and check
    each answer against the document."""
    schema = schemathesis.openapi.from_url(f"{live_dev.url}/openapi.json")
    tenant = "fuzz-manage"
    create = schema["/jobs"]["POST"]

    def call(path: str, method: str, status: int, **kwargs: object) -> httpx.Response:
        case = schema[path][method].Case(**kwargs)
        response = case.call_and_validate(checks=CHECKS, headers=live_dev.auth_headers)
        assert response.status_code == status, f"{method} {path}: {response.text}"
        return response

    def seed(key: str, **fields: object) -> str:
        body = {"idempotencyKey": key, "tenantId": tenant, "jobType": "noop", **fields}
        response = create.Case(body=body, media_type="application/json").call_and_validate(
            checks=CHECKS, headers=live_dev.auth_headers
        )
        assert response.status_code == 201, response.text
        job_id: str = response.json()["id"]
        return job_id

    later = seed("fuzz-manage-later", scheduledAt="2999-01-01T00:00:00Z")
    template = seed("fuzz-manage-template", cron="0 3 * * *")
    on_job = {"path_parameters": {"job_id": later}}
    on_template = {"path_parameters": {"job_id": template}}

    assert call("/jobs/{job_id}/cancel", "POST", 200, **on_job).json()["status"] == "cancelled"
    conflict = call("/jobs/{job_id}/pause", "POST", 409, **on_job).json()
    assert (conflict["jobId"], conflict["status"]) == (later, "cancelled")
    retried = call(
        "/jobs/{job_id}/retry",
        "POST",
        200,
        body={"scheduledAt": "2999-01-01T00:00:00Z"},
        media_type="application/json",
        **on_job,
    ).json()
    assert retried["status"] == "pending"
    bulk = {"body": {"filter": {"tenantId": tenant, "cron": False}}}
    cancelled = call("/jobs/cancel", "POST", 200, media_type="application/json", **bulk).json()
    assert cancelled["changed"] == 1
    # Due far ahead, like the single retry above: a job due now would run at once, and its
    # attempt record would race the attempts read below.
    later_filter = {"body": {**bulk["body"], "scheduledAt": "2999-01-01T00:00:00Z"}}
    retried_all = call(
        "/jobs/retry", "POST", 200, media_type="application/json", **later_filter
    ).json()
    assert retried_all["changed"] == 1
    assert call("/jobs/{job_id}/attempts", "GET", 200, **on_job).json()["attempts"] == []

    assert call("/jobs/{job_id}/pause", "POST", 200, **on_template).json()["status"] == "paused"
    assert call("/jobs/{job_id}/resume", "POST", 200, **on_template).json()["status"] == "pending"
    run = call("/jobs/{job_id}/trigger", "POST", 201, **on_template).json()
    assert run["templateId"] == template
    updated = call(
        "/jobs/{job_id}",
        "PATCH",
        200,
        body={"cron": "0 4 * * *"},
        media_type="application/json",
        **on_template,
    ).json()
    assert updated["cron"] == "0 4 * * *"
    assert call("/jobs/{job_id}", "DELETE", 200, **on_template).json()["status"] == "cancelled"
    listing = call("/jobs", "GET", 200, query={"tenantId": tenant, "cron": "true"}).json()
    assert [job["id"] for job in listing] == [template]
    stats = call("/stats", "GET", 200, query={"tenantId": tenant}).json()
    assert stats["tenantId"] == tenant
    assert sum(stats["byStatus"].values()) == 3  # the one-off, the template and its run
