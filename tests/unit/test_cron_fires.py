"""Fire times in time zones under the DST policy, against an independent model.

The model (below) shares nothing with the implementation: it walks UTC minutes, reads each
one's local wall time (the unambiguous direction, ``astimezone``), and so learns which wall
times exist once, twice (fold) or never (gap, with the first instant after it). It matches
expressions with its own small cron matcher. The implementation walks wall times with
croniter and maps them back with PEP 495 ``fold`` rules. They must agree on every fire time
and on its ``shifted``/``repeated``/``second`` marks:

- explicitly, around every DST transition of 2026-2027 in Europe/Paris, America/New_York,
  Australia/Lord_Howe and America/Santiago, for several expressions and all four policies;
- on generated cases (hypothesis): zones with and without DST, years 2024-2030, windows
  placed at random or near a transition, generated expressions and policies.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

from jobscheduler.domain import cron
from jobscheduler.domain.cron import DstFold, DstGap
from jobscheduler.errors import ValidationError

MINUTE = timedelta(minutes=1)
DST_ZONES = ("Europe/Paris", "America/New_York", "Australia/Lord_Howe", "America/Santiago")
ALL_ZONES = (*DST_ZONES, "Asia/Kolkata", "UTC", "Europe/London", "Pacific/Chatham")
POLICIES = [(gap, fold) for gap in DstGap for fold in DstFold]

# ----------------------------------------------------------------------------- the model


def _field(text: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/")
            step = int(step_text)
        if part == "*":
            first, last = low, high
        elif "-" in part:
            first, last = (int(x) for x in part.split("-"))
        else:
            first = last = int(part)
            if step != 1:
                last = high
        values.update(range(first, last + 1, step))
    return frozenset(values)


@functools.lru_cache(maxsize=256)
def _matcher(expression: str) -> tuple[frozenset[int], ...]:
    minute, hour, dom, month, dow = expression.split()
    # The generated expressions restrict at most one of day-of-month and day-of-week, so
    # "both must match" is the whole rule here.
    assert dom == "*" or dow == "*"
    return (
        _field(minute, 0, 59),
        _field(hour, 0, 23),
        _field(dom, 1, 31),
        _field(month, 1, 12),
        _field(dow, 0, 6),
    )


def model_matches(expression: str, wall: datetime) -> bool:
    minute, hour, dom, month, dow = _matcher(expression)
    return (
        wall.minute in minute
        and wall.hour in hour
        and wall.day in dom
        and wall.month in month
        and (wall.isoweekday() % 7) in dow
    )


Mark = tuple[datetime, datetime, bool, bool, bool]  # at, wall, shifted, repeated, second


def model_fires(
    expression: str, zone: str, gap: DstGap, fold: DstFold, start: datetime, end: datetime
) -> list[Mark]:
    """Fire times in ``(start, end]``: walk every UTC minute around the window, learn each
    wall time's instants, apply the policy by its plain-words definition."""
    tz = ZoneInfo(zone)
    instants: dict[datetime, list[datetime]] = {}
    gap_target: dict[datetime, datetime] = {}
    u = start.replace(second=0, microsecond=0) - timedelta(hours=6)
    previous_wall: datetime | None = None
    while u <= end + timedelta(hours=6):
        wall = u.astimezone(tz).replace(tzinfo=None)
        instants.setdefault(wall, []).append(u)
        if previous_wall is not None and wall - previous_wall > MINUTE:
            missing = previous_wall + MINUTE
            while missing < wall:  # wall times that never happen: the first instant after
                gap_target[missing] = u
                missing += MINUTE
        previous_wall = wall
        u += MINUTE
    by_instant: dict[datetime, Mark] = {}
    for wall in sorted({*instants, *gap_target}):
        if not model_matches(expression, wall):
            continue
        marks: list[Mark]
        if wall in gap_target:
            marks = [] if gap is DstGap.SKIP else [(gap_target[wall], wall, True, False, False)]
        elif len(instants[wall]) == 2:
            first, second = instants[wall]
            marks = [(first, wall, False, True, False)]
            if fold is DstFold.BOTH:
                marks.append((second, wall, False, True, True))
        else:
            marks = [(instants[wall][0], wall, False, False, False)]
        for mark in marks:
            at = mark[0]
            if not start < at <= end:
                continue
            if at in by_instant:  # several wall times on one instant: one fire time
                old = by_instant[at]
                mark = (
                    at,
                    min(old[1], mark[1]),
                    old[2] or mark[2],
                    old[3] or mark[3],
                    old[4] and mark[4],
                )
            by_instant[at] = mark
    return [by_instant[at] for at in sorted(by_instant)]


def implementation_fires(
    expression: str, zone: str, gap: DstGap, fold: DstFold, start: datetime, end: datetime
) -> list[Mark]:
    out: list[Mark] = []
    for fire in cron.iter_fires(expression, start, timezone=zone, dst_gap=gap, dst_fold=fold):
        if fire.at > end:
            break
        out.append((fire.at, fire.wall, fire.shifted, fire.repeated, fire.second))
    return out


def transitions(zone: str, years: range) -> list[datetime]:
    """Every UTC-offset change of ``zone`` in ``years`` (to the minute), found by scanning."""
    tz = ZoneInfo(zone)
    found = []
    u = datetime(years.start, 1, 1, tzinfo=UTC)
    stop = datetime(years.stop, 1, 1, tzinfo=UTC)
    offset = u.astimezone(tz).utcoffset()
    while u < stop:
        nxt = u + timedelta(hours=1)
        if nxt.astimezone(tz).utcoffset() != offset:
            m = u
            while m.astimezone(tz).utcoffset() == offset:
                m += MINUTE
            found.append(m)
            offset = nxt.astimezone(tz).utcoffset()
        u = nxt
    return found


TRANSITIONS_2026_2027 = [(z, t) for z in DST_ZONES for t in transitions(z, range(2026, 2028))]

# ----------------------------------------------------------------------------- explicit


def test_every_zone_has_four_transitions_in_2026_2027() -> None:
    for zone in DST_ZONES:
        assert len([t for z, t in TRANSITIONS_2026_2027 if z == zone]) == 4, zone


EXPRESSIONS = ("*/15 * * * *", "30 2 * * *", "0 * * * *", "30 0 * * *", "30 23 * * *", "45 1 * * 0")


@pytest.mark.parametrize(("zone", "transition"), TRANSITIONS_2026_2027)
@pytest.mark.parametrize("expression", EXPRESSIONS)
@pytest.mark.parametrize(("gap", "fold"), POLICIES)
def test_fire_times_around_each_2026_2027_transition_agree_with_the_model(
    zone: str, transition: datetime, expression: str, gap: DstGap, fold: DstFold
) -> None:
    start, end = transition - timedelta(days=1, minutes=7), transition + timedelta(days=1)
    expected = model_fires(expression, zone, gap, fold, start, end)
    assert implementation_fires(expression, zone, gap, fold, start, end) == expected


def _utc(zone: str, text: str, fold: int = 0) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone), fold=fold).astimezone(UTC)


def _next(expression: str, zone: str, after: str, **policy: object) -> list[cron.Fire]:
    fires = cron.iter_fires(expression, _utc(zone, after), timezone=zone, **policy)  # type: ignore[arg-type]
    return [next(fires) for _ in range(3)]


def test_paris_0230_on_spring_forward_day_runs_once_at_0300_by_default() -> None:
    fires = _next("30 2 * * *", "Europe/Paris", "2026-03-28T12:00")
    assert [f.at for f in fires] == [
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),  # 03:00 CEST, the first instant after the gap
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),
        datetime(2026, 3, 31, 0, 30, tzinfo=UTC),
    ]
    assert [f.shifted for f in fires] == [True, False, False]
    assert fires[0].wall == datetime(2026, 3, 29, 2, 30)


def test_paris_0230_on_spring_forward_day_is_skipped_under_dst_gap_skip() -> None:
    fires = _next("30 2 * * *", "Europe/Paris", "2026-03-28T12:00", dst_gap=DstGap.SKIP)
    assert fires[0].at == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)


def test_gap_times_and_the_real_time_after_the_gap_make_one_fire_time() -> None:
    fires = _next("0,30 2,3 * * *", "Europe/Paris", "2026-03-29T00:00")
    # 02:00 and 02:30 do not exist and shift to 03:00, itself a fire time: one run there.
    assert [f.at for f in fires] == [
        datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
        datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
        datetime(2026, 3, 30, 0, 0, tzinfo=UTC),
    ]
    assert fires[0].shifted
    assert fires[0].wall == datetime(2026, 3, 29, 2, 0)


def test_paris_0230_on_fall_back_day_runs_at_first_occurrence_or_both() -> None:
    first = _next("30 2 * * *", "Europe/Paris", "2026-10-24T12:00")
    assert first[0].at == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST
    assert first[0].repeated
    assert not first[0].second
    assert first[1].at == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)
    both = _next("30 2 * * *", "Europe/Paris", "2026-10-24T12:00", dst_fold=DstFold.BOTH)
    assert [f.at for f in both[:2]] == [
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # 02:30 CEST
        datetime(2026, 10, 25, 1, 30, tzinfo=UTC),  # 02:30 CET
    ]
    assert both[1].second


def test_lord_howe_half_hour_shift_follows_the_same_rules() -> None:
    # 2026-10-04 02:00 -> 02:30 (+10:30 -> +11): 02:15 does not exist, runs at 02:30.
    spring = _next("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00")
    assert spring[0].at == _utc("Australia/Lord_Howe", "2026-10-04T02:30")
    assert spring[0].shifted
    # 2026-04-05 02:00 -> 01:30 (+11 -> +10:30): 01:45 happens twice.
    fall = _next("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00", dst_fold=DstFold.BOTH)
    assert [f.at for f in fall[:2]] == [
        _utc("Australia/Lord_Howe", "2026-04-05T01:45", fold=0),
        _utc("Australia/Lord_Howe", "2026-04-05T01:45", fold=1),
    ]
    assert fall[1].at - fall[0].at == timedelta(minutes=30)


def test_santiago_midnight_gap_shifts_to_0100_and_the_repeated_2330_runs_once() -> None:
    # 2026-09-06 00:00 -> 01:00: 00:30 does not exist.
    spring = _next("30 0 * * *", "America/Santiago", "2026-09-05T12:00")
    assert spring[0].at == datetime(2026, 9, 6, 4, 0, tzinfo=UTC)  # 01:00 -03
    assert spring[0].local(ZoneInfo("America/Santiago")).hour == 1
    # 2026-04-05 00:00 -> 2026-04-04 23:00: 23:30 on the 4th happens twice.
    fall = _next("30 23 * * *", "America/Santiago", "2026-04-04T12:00")
    assert fall[0].at == datetime(2026, 4, 5, 2, 30, tzinfo=UTC)
    assert fall[1].at == datetime(2026, 4, 6, 3, 30, tzinfo=UTC)


def test_kolkata_has_no_dst_so_every_day_fires_at_the_same_utc_time() -> None:
    fires = cron.iter_fires("30 2 * * *", datetime(2026, 3, 1, tzinfo=UTC), timezone="Asia/Kolkata")
    times = [next(fires) for _ in range(366)]
    assert {(f.at.hour, f.at.minute) for f in times} == {(21, 0)}
    assert not any(f.shifted or f.repeated for f in times)


def test_utc_next_fire_keeps_its_old_meaning() -> None:
    assert cron.next_fire("0 2 * * *", datetime(2026, 1, 1, tzinfo=UTC)) == datetime(
        2026, 1, 1, 2, 0, tzinfo=UTC
    )


def test_unknown_zone_is_a_validation_error() -> None:
    for name in ("Mars/Olympus", "", "../../etc/passwd", "/etc/localtime", "x" * 100):
        with pytest.raises(ValidationError, match="timezone"):
            cron.zone(name)


def test_walk_started_in_the_first_pass_of_a_fold_still_finds_the_second_occurrences() -> None:
    # after = 02:10 CEST (first pass): 02:00 CET and 02:15 CET come later in time.
    after = _utc("Europe/Paris", "2026-10-25T02:10", fold=0)
    fires = cron.iter_fires("*/15 2 * * *", after, timezone="Europe/Paris", dst_fold=DstFold.BOTH)
    got = [next(fires).at for _ in range(7)]
    assert got == sorted(got)
    assert got[:6] == [
        _utc("Europe/Paris", "2026-10-25T02:15", 0),
        _utc("Europe/Paris", "2026-10-25T02:30", 0),
        _utc("Europe/Paris", "2026-10-25T02:45", 0),
        _utc("Europe/Paris", "2026-10-25T02:00", 1),
        _utc("Europe/Paris", "2026-10-25T02:15", 1),
        _utc("Europe/Paris", "2026-10-25T02:30", 1),
    ]


# ----------------------------------------------------------------------------- generated


def _part(draw: st.DrawFn, low: int, high: int) -> str:
    kind = draw(st.sampled_from(["value", "range", "step", "list", "star_step"]))
    if kind == "value":
        return str(draw(st.integers(low, high)))
    if kind == "range":
        a = draw(st.integers(low, high))
        return f"{a}-{draw(st.integers(a, high))}"
    if kind == "step":
        a = draw(st.integers(low, high))
        b = draw(st.integers(a, high))
        return f"{a}-{b}/{draw(st.integers(1, max(1, high - low)))}"
    if kind == "star_step":
        return f"*/{draw(st.integers(1, max(1, high - low)))}"
    values = draw(st.lists(st.integers(low, high), min_size=2, max_size=4, unique=True))
    return ",".join(str(v) for v in sorted(values))


@st.composite
def expressions(draw: st.DrawFn) -> str:
    minute = draw(st.sampled_from(["*", "0", "30", "*/15", "*/20"])) if draw(st.booleans()) else ""
    if not minute:
        minute = _part(draw, 0, 59)
    # Hours near the usual transition times (midnight, 01-03) most of the time.
    hours = ["*", "0-3", "23", "1,2", "2", "0", "1", "*", "*/2"]
    hour = draw(st.sampled_from(hours)) if draw(st.integers(0, 3)) else ""
    if not hour:
        hour = _part(draw, 0, 23)
    day_field = draw(st.sampled_from(["none", "none", "none", "dom", "dow"]))
    dom = _part(draw, 1, 28) if day_field == "dom" else "*"
    dow = _part(draw, 0, 6) if day_field == "dow" else "*"
    month = "*" if draw(st.integers(0, 4)) else _part(draw, 1, 12)
    return f"{minute} {hour} {dom} {month} {dow}"


@functools.cache
def _transitions_cached(zone: str) -> list[datetime]:
    return transitions(zone, range(2024, 2031))


@st.composite
def windows(draw: st.DrawFn) -> tuple[str, datetime, datetime]:
    zone = draw(st.sampled_from(DST_ZONES if draw(st.integers(0, 3)) else ALL_ZONES))
    seconds = timedelta(seconds=draw(st.sampled_from([0, 0, 1, 30, 59])))
    near = _transitions_cached(zone) if zone in DST_ZONES else []
    if near and draw(st.integers(0, 3)):  # mostly: a window that contains a transition
        center = draw(st.sampled_from(near))
        start = center - timedelta(minutes=draw(st.integers(0, 12 * 60))) + seconds
        end = center + timedelta(minutes=draw(st.integers(1, 24 * 60)))
        return zone, start, end
    start = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(
        minutes=draw(st.integers(0, 7 * 366 * 24 * 60))
    )
    return zone, start + seconds, start + timedelta(hours=draw(st.integers(1, 72)))


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    expression=expressions(),
    window=windows(),
    gap=st.sampled_from(list(DstGap)),
    fold=st.sampled_from(list(DstFold)),
)
def test_generated_schedules_agree_with_the_model(
    expression: str, window: tuple[str, datetime, datetime], gap: DstGap, fold: DstFold
) -> None:
    try:
        expression = cron.validate(expression)
    except ValidationError:
        reject()  # e.g. a day-of-month the month list never has: rejected at create anyway
    zone, start, end = window
    expected = model_fires(expression, zone, gap, fold, start, end)
    event(f"shifted fire times: {any(mark[2] for mark in expected)}")
    event(f"repeated fire times: {any(mark[3] for mark in expected)}")
    assert implementation_fires(expression, zone, gap, fold, start, end) == expected
