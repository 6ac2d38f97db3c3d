"""``POST /jobs`` refused for its body: invalid fields (400), a body that is not a JSON
object, malformed JSON or NaN (400), a body over 1 MiB (413) and a non-JSON content type
(415); and the edges that are accepted (a body of exactly 1 MiB, JSON content types with
parameters or a ``+json`` suffix). A refused create stores nothing.

Runs through the ``api`` fixture of ``conftest.py``, both ways (``[fast]``/``[quart]``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobscheduler.api import MAX_BODY_BYTES
from jobscheduler.domain.model import Status
from jobscheduler.store import JobStore

from .api_support import JSON, Api, create_body

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
    (
        "workflow-unknown-step-type",
        create_body(jobType="start-workflow", payload={"steps": [{"name": "a", "jobType": "x"}]}),
        "payload.steps[0] (a): jobType: unknown job type 'x'",
    ),
    (
        "workflow-cycle",
        create_body(
            jobType="start-workflow",
            payload={
                "steps": [
                    {"name": "a", "jobType": "noop", "dependsOn": ["b"]},
                    {"name": "b", "jobType": "noop", "dependsOn": ["a"]},
                ]
            },
        ),
        "payload.steps: a cycle, each waiting for the next: a -> b -> a",
    ),
    (
        "workflow-own-tenant",
        create_body(jobType="start-workflow", payload={"tenantId": "other", "steps": []}),
        "payload.tenantId: a start-workflow job starts its workflow in its own tenant",
    ),
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
    (
        "no-timezone",
        create_body(scheduledAt="2026-09-29T18:00:00"),
        "scheduledAt 2026-09-29T18:00:00 has no time zone; add Z or +01:00",
    ),
    ("not-a-time", create_body(scheduledAt="tomorrow"), "scheduledAt"),
    ("unknown-field", create_body(status="completed"), "unknown field(s): status"),
]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [pytest.param(body, fragment, id=name) for name, body, fragment in VALIDATION_FAILURES],
)
async def test_invalid_create_request_is_400_with_a_json_error(
    api: Api, store: JobStore, body: dict[str, Any], fragment: str
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


async def test_body_over_one_mebibyte_is_413(api: Api, store: JobStore) -> None:
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
