"""Small latency statistics shared by the operator tools (``loadtest``, ``bench``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (``0 <= p <= 100``) of ``values``, by linear interpolation.

    This is the "linear" method (Hyndman & Fan type 7, numpy's default): sort the values,
    take the fractional rank ``(n - 1) * p / 100`` and interpolate between the two
    neighbouring values. So ``p=0`` is the minimum, ``p=100`` the maximum, ``p=50`` the
    median, and a single value is every percentile of itself. ``values`` need not be sorted.

    Raises ValueError when ``values`` is empty or ``p`` is outside ``[0, 100]``.
    """
    if not 0 <= p <= 100 or math.isnan(p):
        raise ValueError(f"percentile must be between 0 and 100, got {p!r}")
    if not values:
        raise ValueError("percentile of an empty sequence")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def percentiles(values: Sequence[float], ps: Iterable[float]) -> dict[float, float]:
    """Several percentiles of ``values`` at once (``{p: percentile(values, p)}``); the
    values are sorted once. Raises ValueError like :func:`percentile`."""
    ordered = sorted(values)
    return {p: percentile(ordered, p) for p in ps}


def format_seconds(seconds: float) -> str:
    """A latency for people: ``850µs``, ``12.3ms``, ``1.24s``, ``2m05s``."""
    if math.isnan(seconds):
        return "-"
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 0.001:
        return f"{sign}{seconds * 1e6:.0f}µs"
    if seconds < 1:
        return f"{sign}{seconds * 1e3:.1f}ms"
    if seconds < 60:
        return f"{sign}{seconds:.2f}s"
    minutes, rest = divmod(seconds, 60)
    return f"{sign}{int(minutes)}m{rest:02.0f}s"
