"""Create-request validation, one rule per case: the accepted defaults, required fields,
string rules, the payload of each job type, priority and maxAttempts, and unknown or
server-owned fields. The schedule fields (cron, scheduledAt) are in
``test_model_schedule.py``."""

from __future__ import annotations

import math
from typing import Any

import pytest

from jobscheduler.domain.model import Status, is_job_id
from jobscheduler.errors import ValidationError

from .model_support import NOW, body, create, rejected

# ----------------------------------------------------------------------- create: accepted


def test_valid_one_off_request_builds_pending_job_with_contract_defaults() -> None:
    job = create(body())
    assert job.status is Status.PENDING
    assert job.idempotency_key == "key-1"
    assert job.tenant_id == "tenant-a"
    assert job.job_type == "noop"
    assert job.payload == {}
    assert job.priority == 0
    assert job.max_attempts == 3
    assert job.attempts == 0
    assert job.cron is None
    assert job.scheduled_at == NOW
    assert job.created_at == job.updated_at == NOW
    assert is_job_id(job.id)


def test_each_request_gets_a_fresh_job_id() -> None:
    assert create(body()).id != create(body()).id


# ----------------------------------------------------------------------- required fields


@pytest.mark.parametrize("field", ["idempotencyKey", "tenantId", "jobType"])
def test_missing_required_string_field_is_rejected(field: str) -> None:
    raw = body()
    del raw[field]
    rejected(raw, f"{field} is required")


@pytest.mark.parametrize("field", ["idempotencyKey", "tenantId", "jobType"])
def test_null_required_string_field_is_rejected(field: str) -> None:
    raw = body()
    raw[field] = None
    rejected(raw, f"{field} is required")


@pytest.mark.parametrize("raw", [[], "a string", 42, None, True])
def test_body_that_is_not_an_object_is_rejected(raw: Any) -> None:
    rejected(raw, "must be a JSON object")


# ----------------------------------------------------------------------- string rules


@pytest.mark.parametrize("field", ["idempotencyKey", "tenantId", "jobType"])
@pytest.mark.parametrize(
    ("value", "match"),
    [
        (123, "must be a string"),
        (1.5, "must be a string"),
        (True, "must be a string"),
        (["a"], "must be a string"),
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("x" * 257, "longer than 256"),
        ("tab\there", "control characters"),
    ],
)
def test_invalid_string_field_is_rejected(field: str, value: Any, match: str) -> None:
    rejected(body(**{field: value}), match)


def test_string_of_exactly_max_length_is_accepted() -> None:
    assert create(body(idempotencyKey="k" * 256)).idempotency_key == "k" * 256


@pytest.mark.parametrize(
    "operator",
    [{"$ne": None}, {"$gt": ""}, {"$regex": ".*"}],
    ids=["ne", "gt", "regex"],
)
def test_operator_object_in_tenant_id_is_rejected(operator: dict[str, Any]) -> None:
    rejected(body(tenantId=operator), "tenantId: must be a string")


def test_unknown_job_type_is_rejected_and_lists_known_types() -> None:
    with pytest.raises(ValidationError, match="unknown job type 'email'") as info:
        create(body(jobType="email"))
    assert "flaky, http, log-message, noop, slow" in str(info.value)


# ----------------------------------------------------------------------- payload


@pytest.mark.parametrize("payload", [[], "text", 1, True, [{"message": "x"}]])
def test_payload_that_is_not_an_object_is_rejected(payload: Any) -> None:
    rejected(body(payload=payload), "payload: must be a JSON object")


def test_null_payload_means_empty_object() -> None:
    raw = body()
    raw["payload"] = None
    assert create(raw).payload == {}


def test_payload_is_kept_as_given() -> None:
    payload = {"nested": {"list": [1, 2, {"x": None}]}, "n": 1.5}
    assert create(body(payload=payload)).payload == payload


@pytest.mark.parametrize(
    "payload",
    [{}, {"message": ""}, {"message": 5}, {"message": None}, {"message": ["hi"]}],
    ids=["missing", "empty", "number", "null", "list"],
)
def test_log_message_needs_a_non_empty_string_message(payload: dict[str, Any]) -> None:
    rejected(body(jobType="log-message", payload=payload), "payload.message")


def test_log_message_with_message_is_accepted() -> None:
    job = create(body(jobType="log-message", payload={"message": "hello"}))
    assert job.payload == {"message": "hello"}


@pytest.mark.parametrize(
    "rate",
    [True, False, "0.5", 1.5, -0.1, math.nan, math.inf, None, [0.5]],
    ids=["true", "false", "string", "1.5", "negative", "nan", "inf", "null", "list"],
)
def test_flaky_fail_rate_outside_zero_to_one_is_rejected(rate: Any) -> None:
    rejected(body(jobType="flaky", payload={"failRate": rate}), "payload.failRate")


@pytest.mark.parametrize("rate", [0, 1, 0.0, 1.0, 0.25])
def test_flaky_fail_rate_within_zero_to_one_is_accepted(rate: float) -> None:
    assert create(body(jobType="flaky", payload={"failRate": rate})).payload["failRate"] == rate


def test_flaky_without_fail_rate_is_accepted() -> None:
    assert create(body(jobType="flaky", payload={})).job_type == "flaky"


@pytest.mark.parametrize(
    "ms",
    [-1, 1.5, True, "100", None, math.inf, 24 * 3600 * 1000 + 1],
    ids=["negative", "fraction", "bool", "string", "null", "inf", "over-a-day"],
)
def test_slow_sleep_ms_must_be_a_non_negative_integer(ms: Any) -> None:
    rejected(body(jobType="slow", payload={"sleepMs": ms}), "payload.sleepMs")


@pytest.mark.parametrize("ms", [0, 250, 250.0])
def test_slow_sleep_ms_non_negative_integer_is_accepted(ms: float) -> None:
    assert create(body(jobType="slow", payload={"sleepMs": ms})).job_type == "slow"


# ----------------------------------------------------------------------- priority / attempts


@pytest.mark.parametrize(
    "priority",
    [True, False, 1.5, "5", [1], math.nan, 1_000_001, -1_000_001],
    ids=["true", "false", "fraction", "string", "list", "nan", "too-high", "too-low"],
)
def test_invalid_priority_is_rejected(priority: Any) -> None:
    rejected(body(priority=priority), "priority")


@pytest.mark.parametrize(("given", "stored"), [(2.0, 2), (5, 5), (-3, -3), (0, 0)])
def test_integral_priority_is_accepted(given: float, stored: int) -> None:
    job = create(body(priority=given))
    assert job.priority == stored
    assert type(job.priority) is int


def test_priority_defaults_to_zero() -> None:
    assert create(body()).priority == 0


@pytest.mark.parametrize("given", [None, 0, -1, -100, 0.0])
def test_max_attempts_defaults_to_three_when_omitted_or_not_positive(given: Any) -> None:
    raw = body()
    if given is not None:
        raw["maxAttempts"] = given
    assert create(raw).max_attempts == 3


@pytest.mark.parametrize(("given", "stored"), [(1, 1), (7, 7), (5.0, 5), (100, 100)])
def test_positive_max_attempts_is_kept(given: float, stored: int) -> None:
    assert create(body(maxAttempts=given)).max_attempts == stored


@pytest.mark.parametrize("given", [True, 1.5, "3", 101])
def test_invalid_max_attempts_is_rejected(given: Any) -> None:
    rejected(body(maxAttempts=given), "maxAttempts")


# ----------------------------------------------------------------------- unknown fields


def test_unknown_fields_are_rejected_and_named() -> None:
    rejected(body(foo=1, status="completed"), r"unknown field\(s\): foo, status")


@pytest.mark.parametrize("field", ["id", "attempts", "claimedBy", "createdAt", "lastError"])
def test_server_owned_fields_cannot_be_set_by_clients(field: str) -> None:
    rejected(body(**{field: "x"}), "unknown field")
