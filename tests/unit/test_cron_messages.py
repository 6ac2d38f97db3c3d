"""An invalid cron expression says which field is wrong and why, in words a newcomer can act
on; the same sentence reaches the API's 400, the CLI and the dashboard."""

from __future__ import annotations

import pytest

from jobscheduler.domain import cron
from jobscheduler.errors import ValidationError

from .api_support import Api, create_body


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("61 * * * *", "minute 61 is out of range 0-59"),
        ("0 24 * * *", "hour 24 is out of range 0-23"),
        ("0 0 0 * *", "day 0 is out of range 1-31 (day of the month)"),
        ("0 0 * 13 *", "month 13 is out of range 1-12"),
        ("0 0 * * 8", "day-of-week 8 is out of range 0-7 (0 and 7 are Sunday)"),
        ("0-60 * * * *", "minute 60 is out of range 0-59"),
        ("0 0 31 2 *", "day 31 never occurs in February"),
        ("0 0 31 feb *", "day 31 never occurs in February"),
        ("0 0 30,31 2 *", "days 30 and 31 never occur in February"),
        ("0 0 31 4,6,9,11 *", "day 31 never occurs in April, June, September or November"),
        ("*/0 * * * *", "minute: the step in '*/0' must be a whole number from 1"),
        ("1,,2 * * * *", "minute: an empty item in '1,,2'"),
        ("-1 * * * *", "minute '-1' is not a number (0-59)"),
        (
            "0 0 * foo *",
            "month 'foo' is not a number or a name "
            "(jan, feb, mar, apr, may, jun, jul, aug, sep, oct, nov, dec)",
        ),
        ("0 0 * * 1#6", "day-of-week: '1#6' names the nth weekday: #1 to #5"),
    ],
)
def test_an_invalid_expression_names_the_field_and_why(expression: str, message: str) -> None:
    with pytest.raises(ValidationError) as refused:
        cron.validate(expression)
    assert str(refused.value) == f"cron: {message}"


@pytest.mark.parametrize(
    "expression", ["0 0 29 2 *", "0 0 31 2,3 *", "0 0 31 */2 *", "5-3 * * * *"]
)
def test_expressions_that_can_fire_are_not_refused(expression: str) -> None:
    assert cron.validate(expression)


async def test_the_api_answers_the_same_sentence_for_a_create_and_a_preview(api: Api) -> None:
    created = await api.create(create_body(scheduledAt=None, cron="0 0 31 2 *"))
    assert created.assert_error(400) == "cron: day 31 never occurs in February"
    preview = await api.request("POST", "/cron/preview", json={"cron": "61 * * * *"})
    assert preview.assert_error(400) == "cron: minute 61 is out of range 0-59"
