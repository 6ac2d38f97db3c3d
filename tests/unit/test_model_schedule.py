"""Create-request validation of the schedule: cron or scheduledAt (never both, one of
them required), cron expressions and the template's first fire time computed server side,
and scheduledAt as RFC3339 with a zone, normalised to UTC milliseconds."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobscheduler.domain.model import Status, parse_time
from jobscheduler.domain.validation import parse_create_request
from jobscheduler.errors import ValidationError

from .model_support import JOB_TYPES, NOW, body, create, rejected

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


@pytest.mark.parametrize("text", ["2026-12-02T09:00:00", "2026-12-02 09:00:00.250"])
def test_a_date_time_without_a_zone_is_refused_saying_so_and_how_to_add_one(text: str) -> None:
    message = f"scheduledAt {text} has no time zone; add Z or +01:00"
    rejected(body(scheduledAt=text), re.escape(message))


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
