"""Cron expressions in words ("At 09:00, Monday through Friday, Europe/Paris"), rendered by
the ``cron-descriptor`` library (MIT) after the project's own validation."""

from __future__ import annotations

import logging

from cron_descriptor import ExpressionDescriptor, Options

from jobscheduler.domain import cron
from jobscheduler.errors import ValidationError

log = logging.getLogger(__name__)


def describe_cron(expression: str, timezone: str | None = None) -> str:
    """``expression`` (validated like a template's; ValidationError if not) in English, with
    24-hour times and the zone its wall times are read in (UTC when none is given)."""
    normalised = cron.validate(expression)
    options = Options()
    options.use_24hour_time_format = True
    options.verbose = False
    try:
        words = str(ExpressionDescriptor(normalised, options).get_description())
    except Exception as exc:  # the library's own errors; the expression itself is valid
        log.debug("cron description failed", extra={"cron": normalised, "error": str(exc)})
        raise ValidationError(f"cron: cannot describe {normalised!r}") from None
    return f"{words}, {timezone or 'UTC'}"
