"""Jobs that ended, counted as they end: the throughput figures' source.

``GET /stats``'s windows and the Overview's series count the jobs that reached an end of
:data:`~jobscheduler.store.query.THROUGHPUT` lately. Each adapter keeps, in the same write as
the transition (or the insert) that reaches one, a counter per (tenant, status, step): a step
is :data:`STEP` of wall-clock time, by the job's ``updated_at`` at that write. So the
figures read a few hundred counters, whatever the number of jobs that ended in the hour.

What they count is ends, not jobs: a dead-lettered job retried later stays counted where it
failed, and a job pruned since stays counted where it ended. A window holds the steps that
began within it, so a window of N minutes counts between N minutes less one step and N
minutes. The reaper forgets the steps older than :data:`KEPT`
(:meth:`~jobscheduler.store.upkeep.Upkeep.forget_ends`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Final

from jobscheduler.domain.model import Status, utc
from jobscheduler.domain.overview import SERIES_MINUTES

from .query import STATS_WINDOWS, THROUGHPUT, Window, stats_windows

#: The span of one counter: a minute of the Overview's series is six of them.
STEP: Final = timedelta(seconds=10)
STEP_MS: Final = 10_000
#: How long a step's counters are kept: past the longest figure read (the Overview's hour).
KEPT: Final = timedelta(hours=2)

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_STEPS_PER_MINUTE: Final = 60_000 // STEP_MS

#: One counter: (status, step, how many jobs reached that status in that step).
EndCount = tuple[Status, int, int]


def step_of(at: datetime) -> int:
    """The step holding the instant ``at``: whole :data:`STEP` spans since the epoch."""
    return (utc(at) - _EPOCH) // STEP


def ended(status: Status, old: Status | None = None) -> bool:
    """Whether a write that took a job from ``old`` (None: an insert) to ``status``
    reaches an end the figures count."""
    return status in THROUGHPUT and status is not old


def first_step(now: datetime, minutes: int) -> int:
    """The first step that began within the ``minutes`` before ``now``."""
    return -((_EPOCH - utc(now) + timedelta(minutes=minutes)) // STEP)


def stats_first_step(now: datetime) -> int:
    """The first step ``GET /stats``'s widest window reads."""
    return first_step(now, max(STATS_WINDOWS))


def windows_of(counts: Iterable[EndCount], now: datetime) -> tuple[Window, ...]:
    """``GET /stats``'s windows from the counters of its steps."""
    counts = list(counts)
    firsts = {minutes: first_step(now, minutes) for minutes in STATS_WINDOWS}

    def sum_of(minutes: int, status: Status) -> int:
        first = firsts[minutes]
        return sum(n for s, step, n in counts if s is status and step >= first)

    return stats_windows(sum_of)


def series_of(counts: Iterable[EndCount], start: datetime) -> dict[Status, tuple[int, ...]]:
    """The Overview's series (each end of THROUGHPUT, per minute from ``start``, a whole
    minute) from the counters of its steps; a step outside the hour is left out."""
    first = step_of(start)
    series = {status: [0] * SERIES_MINUTES for status in THROUGHPUT}
    for status, step, n in counts:
        minute = (step - first) // _STEPS_PER_MINUTE
        if status in series and 0 <= minute < SERIES_MINUTES:
            series[status][minute] += n
    return {status: tuple(minutes) for status, minutes in series.items()}


__all__ = [
    "KEPT",
    "STEP",
    "STEP_MS",
    "EndCount",
    "ended",
    "first_step",
    "series_of",
    "stats_first_step",
    "step_of",
    "windows_of",
]
