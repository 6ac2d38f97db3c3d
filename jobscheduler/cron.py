"""Standard 5-field cron expressions (minute hour day-of-month month day-of-week), in UTC."""

from __future__ import annotations

from datetime import UTC, datetime

from croniter import croniter
from croniter.croniter import CroniterError

from .errors import ValidationError

MAX_EXPRESSION_LENGTH = 200


def validate(expression: str) -> str:
    """Return the normalised expression, or raise ValidationError saying what is wrong.

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
    normalised = " ".join(fields)
    if not croniter.is_valid(normalised, strict=True):
        raise ValidationError(f"cron: invalid expression {expression!r}")
    next_fire(normalised, datetime(2000, 1, 1, tzinfo=UTC))
    return normalised


def next_fire(expression: str, after: datetime) -> datetime:
    """The first fire time strictly after ``after`` (UTC, aware).

    Raises ValidationError if the expression does not parse (e.g. hand-edited in the store).
    """
    if after.tzinfo is None:
        raise ValueError("after must be timezone-aware")
    if len(expression.split()) != 5:
        raise ValidationError(f"cron: expected 5 fields, got {expression!r}")
    try:
        itr = croniter(expression, after.astimezone(UTC))
        fire: datetime = itr.get_next(datetime)
    except (CroniterError, ValueError, KeyError) as exc:
        raise ValidationError(f"cron: invalid expression {expression!r}: {exc}") from None
    return fire.astimezone(UTC)
