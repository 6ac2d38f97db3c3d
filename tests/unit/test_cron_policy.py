"""Template schedule settings: parsing and validation, the catch-up plan of one scheduler
pass (pure, no store), jitter offsets, durations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobscheduler.domain import cron
from jobscheduler.domain.cron import CatchUp, CronPolicy, DstFold, DstGap, Overlap
from jobscheduler.domain.cron._catchup import SKIP_COUNT_LIMIT
from jobscheduler.errors import ValidationError

from .conftest import DEFAULT_SCHEDULE_JSON

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EVERY_5 = "*/5 * * * *"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# ----------------------------------------------------------------------------- parsing


def test_defaults_are_utc_shift_first_one_1h_no_jitter_overlap_allowed() -> None:
    policy = cron.parse_policy({}, EVERY_5)
    assert policy == CronPolicy()
    assert policy.to_json() == DEFAULT_SCHEDULE_JSON


def test_every_field_parses_and_round_trips_through_storage() -> None:
    body = {
        "timezone": "Europe/Paris",
        "dstGap": "skip",
        "dstFold": "both",
        "catchUp": "all",
        "catchUpWindow": "90m",
        "jitter": "30s",
        "overlap": "buffer_one",
    }
    policy = cron.parse_policy(body, EVERY_5)
    assert policy == CronPolicy(
        timezone="Europe/Paris",
        dst_gap=DstGap.SKIP,
        dst_fold=DstFold.BOTH,
        catch_up=CatchUp.ALL,
        catch_up_window=timedelta(minutes=90),
        jitter=timedelta(seconds=30),
        overlap=Overlap.BUFFER_ONE,
    )
    assert CronPolicy.from_storage(policy.to_storage()) == policy
    assert policy.to_json() == body


def test_durations_accept_numbers_of_seconds() -> None:
    policy = cron.parse_policy({"catchUpWindow": 120, "jitter": 1.5}, EVERY_5)
    assert policy.catch_up_window == timedelta(minutes=2)
    assert policy.jitter == timedelta(milliseconds=1500)
    assert policy.to_json()["jitter"] == "1500ms"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"timezone": "Mars/Olympus"}, "timezone: unknown time zone"),
        ({"timezone": 5}, "timezone"),
        ({"timezone": ""}, "timezone"),
        ({"dstGap": "later"}, "dstGap: must be one of shift, skip"),
        ({"dstFold": "last"}, "dstFold: must be one of first, both"),
        ({"catchUp": "some"}, "catchUp: must be one of none, one, all"),
        ({"catchUp": True}, "catchUp"),
        ({"catchUpWindow": "forever"}, "catchUpWindow: not a duration"),
        ({"catchUpWindow": "0s"}, "catchUpWindow: must be between 1s and"),
        ({"catchUpWindow": "8d"}, "catchUpWindow"),
        ({"catchUpWindow": 8 * 86400}, "catchUpWindow: must be between"),
        ({"catchUpWindow": -5}, "catchUpWindow: must be a non-negative duration"),
        ({"jitter": "6m"}, "jitter: must not exceed the schedule's interval (5m)"),
        ({"jitter": [1]}, "jitter: must be a duration"),
        ({"jitter": float("nan")}, "jitter: must be a non-negative duration"),
    ],
)
def test_bad_settings_are_validation_errors_naming_the_field(
    body: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ValidationError) as info:
        cron.parse_policy(body, EVERY_5)
    assert fragment in str(info.value)


def test_jitter_may_equal_the_interval_of_an_irregular_schedule() -> None:
    # Weekdays at 09:00: the smallest gap is one day (Mon->Tue), not three.
    assert cron.min_interval("0 9 * * 1-5") == timedelta(days=1)
    cron.parse_policy({"jitter": "24h"}, "0 9 * * 1-5")
    with pytest.raises(ValidationError, match="jitter"):
        cron.parse_policy({"jitter": "25h"}, "0 9 * * 1-5")


def test_min_interval_of_a_leap_day_schedule_is_years() -> None:
    assert cron.min_interval("0 0 29 2 *") >= timedelta(days=4 * 365)


def test_one_value_ranges_are_normalised_because_croniter_reads_them_as_star() -> None:
    assert cron.validate("0 5-5 * * *") == "0 5 * * *"
    assert cron.next_fire("0 5-5 * * *", T0) == T0.replace(hour=5)


# ----------------------------------------------------------------------------- jitter


def test_jitter_offset_is_deterministic_bounded_and_spread() -> None:
    jitter = timedelta(minutes=5)
    offsets = {cron.jitter_offset(f"{i:024x}", T0, jitter) for i in range(50)}
    assert all(timedelta(0) <= o < jitter for o in offsets)
    assert len(offsets) > 40  # fifty templates on one fire time do not start together
    assert cron.jitter_offset("a" * 24, T0, jitter) == cron.jitter_offset("a" * 24, T0, jitter)
    assert cron.jitter_offset("a" * 24, T0, timedelta(0)) == timedelta(0)


# ----------------------------------------------------------------------------- catch-up


def plan(policy: CronPolicy, current: datetime, now: datetime, **kw: Any) -> cron.Plan:
    return cron.plan_pass(EVERY_5, policy, current, now, **kw)


def test_one_runs_once_keyed_on_the_oldest_and_moves_past_now() -> None:
    result = plan(CronPolicy(), T0, at(3600 + 60))
    assert result.spawn == (T0,)
    assert result.skipped == 0
    assert result.next_at == at(3600 + 300)


def test_none_runs_an_on_time_fire_time() -> None:
    result = plan(CronPolicy(catch_up=CatchUp.NONE), T0, at(2))
    assert result.spawn == (T0,)
    assert result.next_at == at(300)


def test_none_skips_every_missed_fire_time() -> None:
    result = plan(CronPolicy(catch_up=CatchUp.NONE), T0, at(3600 + 120))
    assert result.spawn == ()
    assert result.skipped == 13  # 00:00 .. 01:00
    assert result.skip_reason == "missed"
    assert result.next_at == at(3600 + 300)


def test_none_after_downtime_still_runs_the_fire_time_that_is_on_time() -> None:
    result = plan(CronPolicy(catch_up=CatchUp.NONE), T0, at(3600 + 30))
    assert result.spawn == (at(3600),)
    assert result.skipped == 12


def test_all_runs_every_fire_time_in_the_window_oldest_first_and_skips_older() -> None:
    policy = CronPolicy(catch_up=CatchUp.ALL, catch_up_window=timedelta(minutes=30))
    result = plan(policy, T0, at(3600 + 60))
    assert result.spawn == tuple(at(s) for s in range(1800 + 300, 3600 + 1, 300))
    assert result.skipped == 7  # 00:00 .. 00:30 are older than the window
    assert result.skip_reason == "outside_catch_up_window"
    assert result.next_at == at(3600 + 300)


def test_all_is_capped_per_pass_and_leaves_the_template_due_at_the_first_unspawned() -> None:
    policy = CronPolicy(catch_up=CatchUp.ALL, catch_up_window=timedelta(hours=2))
    first = plan(policy, T0, at(3600), cap=5)
    assert first.spawn == tuple(at(s) for s in range(0, 1500, 300))
    assert first.next_at == at(1500)
    second = plan(policy, first.next_at, at(3600), cap=5)
    assert second.spawn[0] == at(1500)
    third = plan(policy, second.next_at, at(3600), cap=5)
    assert third.spawn == (at(3000), at(3300), at(3600))
    assert third.next_at == at(3900)


def test_skipped_count_stops_at_its_limit() -> None:
    policy = CronPolicy(catch_up=CatchUp.NONE)
    result = cron.plan_pass("* * * * *", policy, T0, at(30 * 86400))
    assert result.skipped_capped
    assert result.skipped == SKIP_COUNT_LIMIT


def test_a_template_not_yet_due_plans_nothing() -> None:
    result = plan(CronPolicy(catch_up=CatchUp.ALL), at(300), at(10))
    assert result.spawn == ()
    assert result.next_at == at(300)


def test_catch_up_in_a_zone_counts_each_dst_shifted_fire_time_once() -> None:
    # Paris, 02:00 and 02:30 both shift onto 03:00 on 2026-03-29: one fire time there.
    policy = CronPolicy(
        timezone="Europe/Paris", catch_up=CatchUp.ALL, catch_up_window=timedelta(hours=3)
    )
    current = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # 01:30 CET
    result = cron.plan_pass(
        "0,30 * * * *", policy, current, datetime(2026, 3, 29, 1, 31, tzinfo=UTC)
    )
    assert result.spawn == (
        datetime(2026, 3, 29, 0, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
    )
