"""The job model: create-request validation (one rule per case), list queries, the JSON
shape of a job, and RFC3339 time handling."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from jobscheduler.errors import ValidationError
from jobscheduler.handlers import default_registry
from jobscheduler.model import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    Job,
    Status,
    format_time,
    is_job_id,
    job_to_json,
    loads_json_body,
    parse_create_request,
    parse_list_query,
    parse_time,
)

from .conftest import make_job

NOW = datetime(2026, 9, 29, 18, 0, 0, tzinfo=UTC)
JOB_TYPES = default_registry().validators()


def body(**overrides: Any) -> dict[str, Any]:
    """A valid one-off create body; ``None`` values remove a field."""
    values: dict[str, Any] = {
        "idempotencyKey": "key-1",
        "tenantId": "tenant-a",
        "jobType": "noop",
        "scheduledAt": "2026-09-29T18:00:00Z",
    }
    values.update(overrides)
    return {k: v for k, v in values.items() if v is not None}


def create(raw: Any) -> Job:
    return parse_create_request(raw, now=NOW, job_types=JOB_TYPES)


def rejected(raw: Any, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        create(raw)


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


# ----------------------------------------------------------------------- cron / scheduledAt


def test_cron_and_scheduled_at_together_are_rejected() -> None:
    rejected(body(cron="0 2 * * *"), "either cron or scheduledAt")


def test_neither_cron_nor_scheduled_at_is_rejected() -> None:
    rejected(body(scheduledAt=None), "scheduledAt is required unless cron is set")


@pytest.mark.parametrize(
    "expression",
    [
        "* * * *",
        "0 2 * * * *",
        "@daily",
        "61 * * * *",
        "0 0 31 2 *",
        "0 24 * * *",
        "*/0 * * * *",
        "banana",
        "",
        "0 2 * * 8",
    ],
    ids=[
        "4-fields",
        "6-fields",
        "macro",
        "minute-61",
        "feb-31",
        "hour-24",
        "step-0",
        "word",
        "empty",
        "dow-8",
    ],
)
def test_invalid_cron_is_rejected(expression: str) -> None:
    rejected(body(scheduledAt=None, cron=expression), "cron")


@pytest.mark.parametrize("value", [5, ["0 2 * * *"], {"m": 0}])
def test_non_string_cron_is_rejected(value: Any) -> None:
    rejected(body(scheduledAt=None, cron=value), "cron: must be a string")


def test_cron_template_gets_its_first_fire_time_computed_server_side() -> None:
    job = create(body(scheduledAt=None, cron="0 2 * * *"))
    assert job.cron == "0 2 * * *"
    assert job.scheduled_at == datetime(2026, 9, 30, 2, 0, tzinfo=UTC)
    assert job.scheduled_at > NOW
    assert job.status is Status.PENDING


def test_cron_first_fire_time_is_strictly_after_now_even_on_a_fire_time() -> None:
    on_the_minute = datetime(2026, 9, 30, 2, 0, tzinfo=UTC)
    job = parse_create_request(
        body(scheduledAt=None, cron="0 2 * * *"), now=on_the_minute, job_types=JOB_TYPES
    )
    assert job.scheduled_at == datetime(2026, 10, 1, 2, 0, tzinfo=UTC)


def test_cron_whitespace_is_normalised() -> None:
    assert create(body(scheduledAt=None, cron="  0   2  * * * ")).cron == "0 2 * * *"


@pytest.mark.parametrize(
    "text",
    [
        "2026-09-29T18:00:00",
        "2026-09-29",
        "2026-09-29T18:00Z",
        "yesterday",
        "",
        "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-09-29T25:00:00Z",
        "2026-09-29T18:00:00+24:00",
    ],
    ids=[
        "no-zone",
        "date-only",
        "no-seconds",
        "word",
        "empty",
        "month-13",
        "feb-30",
        "hour-25",
        "offset-24h",
    ],
)
def test_scheduled_at_that_is_not_rfc3339_with_zone_is_rejected(text: str) -> None:
    rejected(body(scheduledAt=text), "scheduledAt")


@pytest.mark.parametrize("value", [1727632800, ["2026-09-29T18:00:00Z"], {"$date": 1}])
def test_non_string_scheduled_at_is_rejected(value: Any) -> None:
    rejected(body(scheduledAt=value), "scheduledAt: must be an RFC3339 string")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-09-29T20:00:00+02:00", datetime(2026, 9, 29, 18, 0, tzinfo=UTC)),
        ("2026-09-29T12:30:00-05:30", datetime(2026, 9, 29, 18, 0, tzinfo=UTC)),
        ("2026-09-30T01:00:00+07:00", datetime(2026, 9, 29, 18, 0, tzinfo=UTC)),
        ("2026-09-29T18:00:00z", datetime(2026, 9, 29, 18, 0, tzinfo=UTC)),
        ("2026-09-29T18:00:00.123Z", datetime(2026, 9, 29, 18, 0, 0, 123000, tzinfo=UTC)),
        ("2026-09-29T18:00:00.123999Z", datetime(2026, 9, 29, 18, 0, 0, 123000, tzinfo=UTC)),
    ],
)
def test_scheduled_at_offsets_are_normalised_to_utc_milliseconds(
    text: str, expected: datetime
) -> None:
    scheduled = create(body(scheduledAt=text)).scheduled_at
    assert scheduled == expected
    assert scheduled.utcoffset() == timedelta(0)


def test_bug_parse_time_lets_overflow_error_escape_for_out_of_range_utc() -> None:
    # Bug: parse_time lets OverflowError escape for an in-range local time whose UTC
    # equivalent is out of datetime's range; the API answers 500 instead of 400.
    with pytest.raises(ValidationError, match="scheduledAt"):
        parse_time("9999-12-31T23:59:59-01:00", "scheduledAt")
    with pytest.raises(ValidationError, match="scheduledAt"):
        parse_time("0001-01-01T00:30:00+01:00", "scheduledAt")


def test_unknown_fields_are_rejected_and_named() -> None:
    rejected(body(foo=1, status="completed"), r"unknown field\(s\): foo, status")


@pytest.mark.parametrize("field", ["id", "attempts", "claimedBy", "createdAt", "lastError"])
def test_server_owned_fields_cannot_be_set_by_clients(field: str) -> None:
    rejected(body(**{field: "x"}), "unknown field")


# ----------------------------------------------------------------------- JSON bodies


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"{'a': 1}", b"[1,]", b"\xff\xfe", b'{"a": 1} trailing', b"[" * 100_000],
    ids=["empty", "unclosed", "single-quotes", "trailing-comma", "bad-utf8", "garbage", "deep"],
)
def test_loads_json_body_rejects_malformed_json(data: bytes) -> None:
    with pytest.raises(ValidationError, match="malformed JSON"):
        loads_json_body(data)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_loads_json_body_rejects_non_standard_constants(constant: str) -> None:
    with pytest.raises(ValidationError, match=f"{constant} is not allowed"):
        loads_json_body(f'{{"priority": {constant}}}'.encode())


def test_loads_json_body_parses_valid_json() -> None:
    assert loads_json_body(b'{"a": [1, 2.5, null, true]}') == {"a": [1, 2.5, None, True]}


# ----------------------------------------------------------------------- list queries


def test_list_query_requires_tenant_id() -> None:
    with pytest.raises(ValidationError, match="tenantId is required"):
        parse_list_query({})


@pytest.mark.parametrize("tenant", ["", "   "])
def test_list_query_rejects_blank_tenant_id(tenant: str) -> None:
    with pytest.raises(ValidationError, match="tenantId is required"):
        parse_list_query({"tenantId": tenant})


def test_list_query_rejects_overlong_tenant_id() -> None:
    with pytest.raises(ValidationError, match="longer than"):
        parse_list_query({"tenantId": "t" * 257})


def test_list_query_treats_operator_text_as_a_literal_tenant() -> None:
    assert parse_list_query({"tenantId": '{"$ne": null}'})[0] == '{"$ne": null}'


@pytest.mark.parametrize("status", ["done", "PENDING", "retrying", "*"])
def test_list_query_rejects_unknown_status(status: str) -> None:
    with pytest.raises(ValidationError, match="status: must be one of"):
        parse_list_query({"tenantId": "t", "status": status})


@pytest.mark.parametrize("status", [s.value for s in Status])
def test_list_query_accepts_every_status(status: str) -> None:
    assert parse_list_query({"tenantId": "t", "status": status})[1] is Status(status)


def test_list_query_defaults() -> None:
    assert parse_list_query({"tenantId": "t"}) == ("t", None, DEFAULT_LIST_LIMIT)
    assert DEFAULT_LIST_LIMIT == 100


@pytest.mark.parametrize(
    ("raw", "limit"),
    [
        ("1", 1),
        ("50", 50),
        ("5000", 5000),
        ("5001", MAX_LIST_LIMIT),
        ("99999999999999999999", MAX_LIST_LIMIT),
        ("0", 100),
        ("-5", 100),
        ("abc", 100),
        ("2.5", 100),
        ("", 100),
    ],
)
def test_list_query_limit_is_capped_and_falls_back_to_default(raw: str, limit: int) -> None:
    assert parse_list_query({"tenantId": "t", "limit": raw})[2] == limit


# ----------------------------------------------------------------------- JSON shape


def test_job_to_json_has_the_contract_shape_and_omits_absent_optional_fields() -> None:
    job = make_job(
        key="test-job-1",
        job_type="log-message",
        payload={"message": "hello"},
        priority=5,
        scheduled_at=NOW,
        created_at=NOW,
    )
    out = job_to_json(job)
    assert out == {
        "id": job.id,
        "idempotencyKey": "test-job-1",
        "tenantId": "tenant-a",
        "jobType": "log-message",
        "payload": {"message": "hello"},
        "priority": 5,
        "status": "pending",
        "scheduledAt": "2026-09-29T18:00:00Z",
        "attempts": 0,
        "maxAttempts": 3,
        "createdAt": "2026-09-29T18:00:00Z",
        "updatedAt": "2026-09-29T18:00:00Z",
    }


def test_job_to_json_includes_optional_fields_when_present_and_never_internal_ones() -> None:
    claimed = NOW + timedelta(seconds=1, milliseconds=250)
    job = Job(
        id="66f9a1c2e4b0a3d5c8f12a01",
        idempotency_key="k",
        tenant_id="t",
        job_type="noop",
        status=Status.PENDING,
        scheduled_at=NOW,
        cron="0 2 * * *",
        attempts=1,
        last_error="boom",
        claimed_by="worker-3k9x",
        claimed_at=claimed,
        claim_token="secret-token",
        heartbeat_at=claimed,
        queued_at=NOW,
        created_at=NOW,
        updated_at=claimed,
    )
    out = job_to_json(job)
    assert out["cron"] == "0 2 * * *"
    assert out["claimedBy"] == "worker-3k9x"
    assert out["claimedAt"] == "2026-09-29T18:00:01.250Z"
    assert out["lastError"] == "boom"
    assert out["updatedAt"] == "2026-09-29T18:00:01.250Z"
    for internal in ("claimToken", "claim_token", "heartbeatAt", "queuedAt"):
        assert internal not in out
    assert "secret-token" not in repr(out)


# ----------------------------------------------------------------------- times


@pytest.mark.parametrize(
    ("dt", "text"),
    [
        (datetime(2026, 9, 29, 18, 0, tzinfo=UTC), "2026-09-29T18:00:00Z"),
        (datetime(2026, 9, 29, 18, 0, 0, 5000, tzinfo=UTC), "2026-09-29T18:00:00.005Z"),
        (datetime(2026, 9, 29, 18, 0, 0, 120000, tzinfo=UTC), "2026-09-29T18:00:00.120Z"),
        (
            datetime(2026, 9, 29, 20, 0, tzinfo=timezone(timedelta(hours=2))),
            "2026-09-29T18:00:00Z",
        ),
    ],
)
def test_format_time_is_utc_with_z_and_milliseconds_only_when_present(
    dt: datetime, text: str
) -> None:
    assert format_time(dt) == text
    assert format_time(dt).endswith("Z")


def test_format_time_round_trips_through_parse_time() -> None:
    dt = datetime(2026, 9, 29, 18, 0, 0, 123000, tzinfo=UTC)
    assert parse_time(format_time(dt), "x") == dt


def test_bug_format_time_does_not_zero_pad_years_before_1000() -> None:
    # Bug: format_time uses strftime('%Y'), which does not zero-pad on glibc, so Go's zero
    # time "0001-01-01T00:00:00Z" (accepted by parse_time) comes back as "1-01-01T00:00:00Z",
    # which is not RFC3339.
    zero = parse_time("0001-01-01T00:00:00Z", "scheduledAt")
    assert format_time(zero) == "0001-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "field", ["scheduled_at", "created_at", "updated_at", "claimed_at", "heartbeat_at", "queued_at"]
)
def test_job_rejects_naive_datetimes(field: str) -> None:
    values: dict[str, Any] = {
        "id": "66f9a1c2e4b0a3d5c8f12a01",
        "idempotency_key": "k",
        "tenant_id": "t",
        "job_type": "noop",
        "scheduled_at": NOW,
        "created_at": NOW,
        "updated_at": NOW,
    }
    values[field] = datetime(2026, 9, 29, 18, 0)
    with pytest.raises(ValueError, match=f"{field} must be timezone-aware UTC"):
        Job(**values)


def test_job_rejects_aware_datetimes_that_are_not_utc() -> None:
    with pytest.raises(ValueError, match="scheduled_at must be timezone-aware UTC"):
        Job(
            id="66f9a1c2e4b0a3d5c8f12a01",
            idempotency_key="k",
            tenant_id="t",
            job_type="noop",
            scheduled_at=datetime(2026, 9, 29, 20, 0, tzinfo=timezone(timedelta(hours=2))),
            created_at=NOW,
            updated_at=NOW,
        )
