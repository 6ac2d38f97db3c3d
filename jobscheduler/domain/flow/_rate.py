"""Rate limits as a generic cell rate algorithm (GCRA): one stored instant per bucket.

A bucket's state is its theoretical arrival time ``tat``: the instant the next start would
be on schedule if starts had gone at exactly the rate. A start conforms at ``now`` if
``tat - tolerance <= now`` (``tolerance`` is ``(burst - 1) * interval``); each start moves
``tat`` on by one interval (from ``now`` if ``tat`` is in the past). One instant is the whole
state, so the leader writes it with one conditional update (expecting the ``tat`` it read):
two leaders overlapping cannot both spend the same starts, and a new leader starts from the
stored instant rather than from a full bucket.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import attrs

from ._limits import Rate


@attrs.frozen(kw_only=True)
class Bucket:
    """One rate's stored state (``tat`` None: never used, full)."""

    scope: str
    tat: datetime | None = None


def allowance(rate: Rate, burst: int, tat: datetime | None, now: datetime) -> int:
    """How many starts conform at ``now`` (0 up to ``burst``)."""
    if tat is None or tat <= now:
        return burst
    interval = rate.interval
    tolerance = (burst - 1) * interval
    ahead = (tat - now).total_seconds()
    if ahead > tolerance + 1e-9:
        return 0
    return min(burst, math.floor((tolerance - ahead) / interval + 1e-9) + 1)


def spend(rate: Rate, tat: datetime | None, now: datetime, starts: int) -> datetime:
    """The bucket's ``tat`` after ``starts`` more starts at ``now``."""
    base = now if tat is None or tat < now else tat
    return base + timedelta(seconds=rate.interval * starts)


def refund(rate: Rate, tat: datetime, starts: int) -> datetime:
    """``tat`` with ``starts`` spent but not used taken back (a ``tat`` in the past reads
    as a full bucket, so taking back more than was spent gives nothing extra)."""
    return tat - timedelta(seconds=rate.interval * starts)


def next_start(rate: Rate, burst: int, tat: datetime | None) -> datetime | None:
    """When the next start conforms (None: now)."""
    if tat is None:
        return None
    return tat - timedelta(seconds=(burst - 1) * rate.interval)
