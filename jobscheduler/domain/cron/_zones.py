"""IANA time zones and the mapping of one wall-clock time to the instants it denotes.

A naive wall time ``w`` in zone ``z`` is, by PEP 495 (``zoneinfo``):

- *normal*: exactly one instant;
- *in a gap* (spring forward): no instant. ``fold=0`` reads it with the offset before the
  change, ``fold=1`` with the offset after, which gives ``u0 > u1``; the first valid instant
  after the gap is the transition itself, somewhere in ``(u1, u0]``;
- *in a fold* (fall back): two instants, ``u0 < u1`` (first and second occurrence).
"""

from __future__ import annotations

import enum
import functools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from jobscheduler.errors import ValidationError

MAX_ZONE_LENGTH = 64


class WallKind(enum.Enum):
    NORMAL = "normal"
    GAP = "gap"
    FOLD = "fold"


@attrs.frozen
class Resolved:
    """The instants one wall time denotes: ``instants`` has one entry (normal), two (fold:
    first and second occurrence) or one (gap: the transition, the first valid instant)."""

    kind: WallKind
    instants: tuple[datetime, ...]


@functools.lru_cache(maxsize=512)
def _load(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def zone(name: str) -> ZoneInfo:
    """The zone of an IANA name; ValidationError (``timezone: ...``) for an unknown one."""
    if not isinstance(name, str) or not name or len(name) > MAX_ZONE_LENGTH:
        raise ValidationError("timezone: must be an IANA zone name such as Europe/Paris")
    # zoneinfo rejects absolute and relative paths itself; keep the message ours.
    try:
        return _load(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValidationError(
            f"timezone: unknown time zone {name!r} (use an IANA name such as Europe/Paris)"
        ) from None


def _transition(before: datetime, after: datetime, tz: ZoneInfo) -> datetime:
    """The instant in ``(before, after]`` where ``tz``'s offset changes (binary search to
    the second; offsets change at whole seconds)."""
    lo, hi = before, after
    offset_lo = lo.astimezone(tz).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) // 2
        mid = mid.replace(microsecond=0)
        if mid <= lo:
            mid = lo + timedelta(seconds=1)
        if mid.astimezone(tz).utcoffset() == offset_lo:
            lo = mid
        else:
            hi = mid
    return hi


def resolve(wall: datetime, tz: ZoneInfo) -> Resolved:
    """The instants (aware UTC) the naive wall time ``wall`` denotes in ``tz``."""
    u0 = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    u1 = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if u0 == u1:
        return Resolved(WallKind.NORMAL, (u0,))
    if u0 < u1:
        return Resolved(WallKind.FOLD, (u0, u1))
    return Resolved(WallKind.GAP, (_transition(u1, u0, tz),))


def offset_drop_ahead(instant: datetime, tz: ZoneInfo, hours: int = 3) -> timedelta:
    """How far the UTC offset falls within ``hours`` after ``instant`` (zero if it does not):
    the size of a fold that is about to start."""
    now = instant.astimezone(tz).utcoffset() or timedelta(0)
    lowest = min(
        (instant + timedelta(hours=h)).astimezone(tz).utcoffset() or timedelta(0)
        for h in range(1, hours + 1)
    )
    return max(timedelta(0), now - lowest)
