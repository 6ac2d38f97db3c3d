"""Standard 5-field cron expressions (minute hour day-of-month month day-of-week).

An expression matches *wall-clock* times: this module walks naive local times with croniter
(handing it UTC datetimes that stand for wall time, so croniter never sees a DST change). The
zone and DST rules that turn those wall times into instants live in :mod:`._zones`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from croniter import croniter
from croniter.croniter import CroniterError

from jobscheduler.errors import ValidationError

from ._diagnosis import explain

MAX_EXPRESSION_LENGTH = 200
#: How many consecutive fire times :func:`min_interval` looks at (at most)...
INTERVAL_SAMPLE = 200
#: ... within this many days after its start (but always two fire times at least).
INTERVAL_HORIZON_DAYS = 5 * 366


def validate(expression: str) -> str:
    """Return the normalised expression, or raise ValidationError saying what is wrong
    (which field and why, e.g. ``cron: day 31 never occurs in February``).

    croniter alone also accepts 6/7-field forms and ``@daily``-style macros; the contract is
    exactly five fields. ``strict=True`` rejects expressions that can never fire (Feb 31).
    """
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ValidationError(f"cron: longer than {MAX_EXPRESSION_LENGTH} characters")
    fields = expression.split()
    if len(fields) != 5:
        raise ValidationError(
            f"cron: expected 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)} in {expression!r}"
        )
    normalised = " ".join(_single_value_ranges(field) for field in fields)
    if not croniter.is_valid(normalised, strict=True):
        # Which field, and why ("minute 61 is out of range 0-59"), when we can tell.
        reason = explain(" ".join(fields))
        raise ValidationError(
            f"cron: {reason}" if reason else f"cron: invalid expression {expression!r}"
        )
    next(wall_times(normalised, datetime(2000, 1, 1)))
    return normalised


_SINGLE_RANGE = re.compile(r"(\w+)-(\w+)(/\d+)?")


def _single_value_ranges(field: str) -> str:
    """``5-5`` -> ``5`` in every comma part: croniter 7 reads a one-value range as ``*``
    (``0 5-5 * * *`` would fire every hour), found by the model-based tests."""
    parts = []
    for part in field.split(","):
        match = _SINGLE_RANGE.fullmatch(part)
        if match and match.group(1).lower() == match.group(2).lower():
            part = match.group(1)
        parts.append(part)
    return ",".join(parts)


def wall_times(expression: str, after: datetime) -> Iterator[datetime]:
    """The naive wall-clock times the expression matches, strictly after naive ``after``.

    Raises ValidationError (on the first ``next``) if the expression does not parse, e.g. a
    hand-edited template in the store.
    """
    if after.tzinfo is not None:
        raise ValueError("after must be a naive wall-clock time")
    fields = expression.split()
    if len(fields) != 5:
        raise ValidationError(f"cron: expected 5 fields, got {expression!r}")
    normalised = " ".join(_single_value_ranges(field) for field in fields)
    try:
        itr = croniter(normalised, after.replace(tzinfo=UTC))
    except (CroniterError, ValueError, KeyError) as exc:
        raise ValidationError(f"cron: invalid expression {expression!r}: {exc}") from None
    while True:
        try:
            wall: datetime = itr.get_next(datetime)
        except (CroniterError, ValueError, KeyError) as exc:
            raise ValidationError(f"cron: invalid expression {expression!r}: {exc}") from None
        yield wall.replace(tzinfo=None)


def min_interval(expression: str, start: datetime | None = None) -> timedelta:
    """The smallest gap between consecutive wall-clock fire times after ``start`` (naive;
    default 2000-01-01): among the next :data:`INTERVAL_SAMPLE` of them, or those within
    :data:`INTERVAL_HORIZON_DAYS` (at least two). The bound that ``jitter`` must respect."""
    first = start or datetime(2000, 1, 1)
    horizon = first + timedelta(days=INTERVAL_HORIZON_DAYS)
    times = wall_times(expression, first)
    previous = next(times)
    smallest: timedelta | None = None
    for _ in range(INTERVAL_SAMPLE):
        current = next(times)
        gap = current - previous
        smallest = gap if smallest is None else min(smallest, gap)
        if current > horizon:
            break
        previous = current
    assert smallest is not None
    return smallest
