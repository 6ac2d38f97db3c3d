"""Fire times: a cron expression read in a time zone, under a stated DST policy.

croniter's own DST handling drops slots in a spring-forward gap and fires twice in a
fall-back fold. Here croniter only walks naive wall-clock times; each wall time is then
mapped to instants by :func:`._zones.resolve` and the template's policy:

- gap (the wall time does not exist): ``dstGap="shift"`` runs once at the first valid instant
  after the gap (the transition), ``"skip"`` drops it;
- fold (the wall time happens twice): ``dstFold="first"`` runs at the first occurrence only,
  ``"both"`` at both.

Several wall times that land on one instant (02:00 and 02:30 shifted onto 03:00, which may
itself be a fire time) make ONE fire time: the identity of a fire time is its UTC instant.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import attrs

from jobscheduler.errors import ValidationError

from ._expression import wall_times
from ._zones import Resolved, WallKind, offset_drop_ahead, resolve, zone


class DstGap(enum.StrEnum):
    """What a fire time whose wall-clock time does not exist (spring forward) does."""

    #: Run once at the first valid instant after the gap. The default.
    SHIFT = "shift"
    #: Do not run.
    SKIP = "skip"


class DstFold(enum.StrEnum):
    """What a fire time whose wall-clock time happens twice (fall back) does."""

    #: Run once, at the first occurrence. The default.
    FIRST = "first"
    #: Run at both occurrences.
    BOTH = "both"


@attrs.frozen(kw_only=True)
class Fire:
    """One fire time.

    ``at`` (aware UTC) is its identity. ``wall`` is the wall-clock time the expression asked
    for (naive; for a shifted fire the earliest such time). ``shifted``: a DST gap moved it
    (its wall time did not exist). ``repeated``: its wall time happens twice that day;
    ``second`` says this is the second occurrence (only under ``dstFold="both"``).
    ``skipped``: a wall time in a DST gap that ``dstGap="skip"`` drops, placed at the first
    instant after the gap (only from ``iter_fires(..., gap_skips=True)``, for the ledger).
    """

    at: datetime
    wall: datetime
    shifted: bool = False
    repeated: bool = False
    second: bool = False
    skipped: bool = False

    def local(self, tz: ZoneInfo) -> datetime:
        return self.at.astimezone(tz)

    def merge(self, other: Fire) -> Fire:
        """Two wall times that land on the same instant make one fire time (a real fire
        time there wins over a skipped gap wall time)."""
        if self.skipped != other.skipped:
            return other if self.skipped else self
        return Fire(
            at=self.at,
            wall=min(self.wall, other.wall),
            shifted=self.shifted or other.shifted,
            repeated=self.repeated or other.repeated,
            second=self.second and other.second,
            skipped=self.skipped,
        )


def _candidates(
    wall: datetime, resolved: Resolved, gap: DstGap, fold: DstFold, gap_skips: bool
) -> list[Fire]:
    if resolved.kind is WallKind.NORMAL:
        return [Fire(at=resolved.instants[0], wall=wall)]
    if resolved.kind is WallKind.GAP:
        if gap is DstGap.SKIP:
            if gap_skips:
                return [Fire(at=resolved.instants[0], wall=wall, shifted=True, skipped=True)]
            return []
        return [Fire(at=resolved.instants[0], wall=wall, shifted=True)]
    first = Fire(at=resolved.instants[0], wall=wall, repeated=True)
    if fold is DstFold.FIRST:
        return [first]
    return [first, Fire(at=resolved.instants[1], wall=wall, repeated=True, second=True)]


def iter_fires(
    expression: str,
    after: datetime,
    *,
    timezone: str = "UTC",
    dst_gap: DstGap = DstGap.SHIFT,
    dst_fold: DstFold = DstFold.FIRST,
    gap_skips: bool = False,
) -> Iterator[Fire]:
    """Every fire time strictly after ``after`` (aware), in order, without end.

    ``gap_skips``: also yield, as ``skipped`` fires, the wall times ``dstGap="skip"`` drops
    (one per gap instant that is not a fire time of its own).

    Raises ValidationError (on the first ``next``) for an expression or zone that does not
    parse. The wall-time walk starts a little before ``after``'s own wall time when a fold
    is about to begin, since a second occurrence comes later than its wall time suggests.
    """
    if after.tzinfo is None:
        raise ValueError("after must be timezone-aware")
    tz = zone(timezone)
    try:
        yield from _walk(expression, after.astimezone(UTC), tz, dst_gap, dst_fold, gap_skips)
    except OverflowError:
        raise ValidationError(
            f"cron: no fire time of {expression!r} within the calendar (years 1-9999)"
        ) from None


def _walk(
    expression: str,
    after: datetime,
    tz: ZoneInfo,
    dst_gap: DstGap,
    dst_fold: DstFold,
    gap_skips: bool = False,
) -> Iterator[Fire]:
    lookback = offset_drop_ahead(after, tz) + timedelta(minutes=1)
    start = after.astimezone(tz).replace(tzinfo=None) - lookback
    # Wall-time order is instant order except for second occurrences in a fold, which come
    # out of the walk early: hold every candidate in a heap and release those below the
    # smallest instant any later wall time can still produce (its first instant).
    pending: dict[datetime, Fire] = {}
    heap: list[datetime] = []
    for wall in wall_times(expression, start.replace(second=0, microsecond=0)):
        resolved = resolve(wall, tz)
        for fire in _candidates(wall, resolved, dst_gap, dst_fold, gap_skips):
            if fire.at <= after:
                continue
            if fire.at in pending:
                pending[fire.at] = pending[fire.at].merge(fire)
            else:
                pending[fire.at] = fire
                heapq.heappush(heap, fire.at)
        floor = resolved.instants[0]
        while heap and heap[0] < floor:
            yield pending.pop(heapq.heappop(heap))


def next_fire(
    expression: str,
    after: datetime,
    *,
    timezone: str = "UTC",
    dst_gap: DstGap = DstGap.SHIFT,
    dst_fold: DstFold = DstFold.FIRST,
) -> datetime:
    """The first fire time strictly after ``after`` (aware), as an aware UTC instant.

    Raises ValidationError if the expression (or zone) does not parse, e.g. hand-edited in
    the store.
    """
    fires = iter_fires(expression, after, timezone=timezone, dst_gap=dst_gap, dst_fold=dst_fold)
    return next(fires).at


def fires_between(
    expression: str,
    start: datetime,
    end: datetime,
    *,
    timezone: str = "UTC",
    dst_gap: DstGap = DstGap.SHIFT,
    dst_fold: DstFold = DstFold.FIRST,
    limit: int | None = None,
) -> list[Fire]:
    """Fire times in ``[start, end]`` (both inclusive), oldest first, at most ``limit``."""
    out: list[Fire] = []
    after = start - timedelta(microseconds=1)
    for fire in iter_fires(
        expression, after, timezone=timezone, dst_gap=dst_gap, dst_fold=dst_fold
    ):
        if fire.at > end or (limit is not None and len(out) >= limit):
            break
        out.append(fire)
    return out
