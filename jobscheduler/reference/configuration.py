"""The configuration reference: every environment variable of ``config.VARIABLES`` with its
default, unit and meaning."""

from __future__ import annotations

from typing import Any

import attrs

from jobscheduler.config import VARIABLES, Settings, Variable

from ._markdown import page_top, table

#: Settings fields measured in seconds (shown as durations).
_DURATION_UNIT = "duration"


def render() -> str:
    """The page."""
    lines = [
        *page_top("Configuration", "`jobscheduler.config.VARIABLES`"),
        "Every role reads only the environment, once, at start. A malformed value stops the "
        "start with one line naming the variable (`jobscheduler: configuration error: "
        "SCHEDULER_TICK: not a duration: 'soon'`). Durations are written `500ms`, `30s`, "
        "`5m` or `1h` (or a number of seconds).",
        "",
        *table(
            ("variable", "default", "unit", "description"),
            [(f"`{v.name}`", default_of(v), v.unit, v.description) for v in VARIABLES],
        ),
        "",
    ]
    return "\n".join(lines)


def default_of(variable: Variable) -> str:
    """The default as the page shows it."""
    if variable.shown_default is not None:
        return variable.shown_default
    value: Any = attrs.fields_dict(Settings)[variable.field].default
    if variable.unit.startswith(_DURATION_UNIT):
        return f"`{duration(float(value))}`"
    if isinstance(value, tuple):
        return f"`{','.join(value)}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`" if value != "" else "(empty)"


def duration(seconds: float) -> str:
    """``500ms``, ``30s``, ``5m``, ``720h``: the largest unit that is exact."""
    millis = round(seconds * 1000)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if millis and millis % size == 0:
            return f"{millis // size}{unit}"
    return f"{millis}ms"
