"""Why a 5-field expression that croniter refuses is wrong, in words: which field, and what
about it ("minute 61 is out of range 0-59", "day 31 never occurs in February").

Only asked about an expression croniter's strict check has refused, so it never refuses
anything by itself: it finds the first field it can name a problem in, or says nothing (the
caller then falls back to a general message).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import attrs

MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
#: The most days each month has (February's leap day included).
MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


@attrs.frozen
class Field:
    """One of the five fields: its name in messages, its range, its names (1 = the first)."""

    name: str
    low: int
    high: int
    names: Sequence[str] = ()
    #: Names count from this number (months from 1, days of the week from 0).
    first: int = 0
    note: str = ""


FIELDS = (
    Field("minute", 0, 59),
    Field("hour", 0, 23),
    Field("day", 1, 31, note=" (day of the month)"),
    Field("month", 1, 12, MONTH_NAMES, first=1),
    Field("day-of-week", 0, 7, DAY_NAMES, note=" (0 and 7 are Sunday)"),
)

_NUMBER = re.compile(r"\d+")
_NAME = re.compile(r"[A-Za-z]+")


class _Problem(Exception):
    """What is wrong with one field (the message)."""


def explain(expression: str) -> str | None:
    """What is wrong with a 5-field ``expression`` croniter refused, or None when this module
    cannot say (the caller says it is invalid in general)."""
    fields = expression.split()
    if len(fields) != 5:
        return None
    values: list[set[int] | None] = []
    for field, text in zip(FIELDS, fields, strict=True):
        try:
            values.append(_field_values(field, text))
        except _Problem as problem:
            return str(problem)
    return _impossible_date(values[2], values[3])


def _field_values(field: Field, text: str) -> set[int] | None:
    """The values ``text`` names in ``field`` (None: not a plain list, e.g. ``*`` or ``L``);
    _Problem for the first part that is wrong."""
    values: set[int] | None = set()
    for part in text.split(","):
        if not part:
            raise _Problem(f"{field.name}: an empty item in {text!r}")
        base, slash, step = part.partition("/")
        if slash and (not _NUMBER.fullmatch(step) or int(step) == 0):
            raise _Problem(f"{field.name}: the step in {part!r} must be a whole number from 1")
        if field.name == "day-of-week" and "#" in base:
            base, _, nth = base.partition("#")
            if not _NUMBER.fullmatch(nth) or not 1 <= int(nth) <= 5:
                raise _Problem(f"day-of-week: {part!r} names the nth weekday: #1 to #5")
        if base in ("*", "?") or (field.name == "day" and base in ("L", "LW")) or "W" in base:
            values = None
            continue
        low, dash, high = base.partition("-")
        if dash and not (low and high):
            what = "a number or a name" if field.names else "a number"
            raise _Problem(f"{field.name} {base!r} is not {what} ({field.low}-{field.high})")
        first = _value(field, low)
        last = _value(field, high) if dash else first
        if slash and not dash:
            last = field.high
        if values is not None:
            if first <= last:
                values.update(range(first, last + 1, int(step) if slash else 1))
            else:
                values = None  # a range that wraps around: croniter's own reading
    return values


def _value(field: Field, text: str) -> int:
    if _NUMBER.fullmatch(text):
        number = int(text)
        if not field.low <= number <= field.high:
            raise _Problem(
                f"{field.name} {number} is out of range {field.low}-{field.high}{field.note}"
            )
        return number
    if _NAME.fullmatch(text) and field.names:
        name = text.lower()
        if name in field.names:
            return field.names.index(name) + field.first
        raise _Problem(
            f"{field.name} {text!r} is not a number or a name ({', '.join(field.names)})"
        )
    what = "a number or a name" if field.names else "a number"
    raise _Problem(f"{field.name} {text!r} is not {what} ({field.low}-{field.high})")


def _impossible_date(days: set[int] | None, months: set[int] | None) -> str | None:
    """ "day 31 never occurs in February" when no listed day occurs in any listed month."""
    if not days:
        return None
    listed = sorted(months) if months else list(range(1, 13))
    if min(days) <= max(MONTH_DAYS[month - 1] for month in listed):
        return None
    numbers = sorted(days)
    which = (
        f"day {numbers[0]} never occurs"
        if len(numbers) == 1
        else f"days {_either(str(n) for n in numbers).replace(' or ', ' and ')} never occur"
    )
    return f"{which} in {_either(MONTHS[month - 1] for month in listed)}"


def _either(words: Iterable[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    items = list(words)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"
