"""Durations as people write them: ``500ms``, ``30s``, ``5m``, ``1h``, ``7d`` (settings, handler
options, cron policies, retentions)."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """Parse ``500ms``, ``30s``, ``5m``, ``1h``, ``7d`` (or bare seconds) into seconds."""
    match = _DURATION.match(text)
    if match:
        return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (use e.g. 500ms, 30s, 5m, 7d)") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"not a duration: {text!r}")
    return value
