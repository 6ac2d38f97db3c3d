"""What the dashboard's Overview reports (``GET /stats/overview``): counts by status, queue
lag, jobs finished per minute over the last hour, and who is running.

The store answers :class:`OverviewStats` with indexed reads only: counts from per-status
index counts (no scan of the jobs), the oldest due job from the due index, and the finished
jobs of each minute of the last hour from the ``(status, updatedAt)`` index. So the cost
grows with the jobs finished in the last hour, not with the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from .model import Status, format_time
from .workers import WorkerBeat

#: Minutes in the throughput chart (one bucket each, the last one is the current minute).
SERIES_MINUTES = 60


def series_start(now: datetime, minutes: int = SERIES_MINUTES) -> datetime:
    """The start of the first bucket: ``minutes - 1`` whole minutes before ``now``'s minute."""
    minute = now.replace(second=0, microsecond=0)
    return minute - timedelta(minutes=minutes - 1)


@attrs.frozen(kw_only=True)
class OverviewStats:
    """A tenant's (or every tenant's) figures, as the store answers them."""

    #: Every status, zero included.
    counts: Mapping[Status, int]
    #: ``scheduled_at`` of the oldest due pending one-off job (None: nothing is waiting).
    oldest_due_at: datetime | None
    #: The first minute of the series.
    start: datetime
    #: Jobs that ended ``completed`` / in ``dlq``, per minute from ``start``.
    completed: tuple[int, ...]
    failed: tuple[int, ...]

    def queue_lag(self, now: datetime) -> float:
        """Seconds the oldest due pending job has waited past its ``scheduledAt``."""
        if self.oldest_due_at is None:
            return 0.0
        return max((now - self.oldest_due_at) / timedelta(seconds=1), 0.0)


def all_statuses(found: Mapping[Status, int]) -> dict[Status, int]:
    """Every status with its count (zero when none was found)."""
    return {status: int(found.get(status, 0)) for status in Status}


def overview_to_json(
    stats: OverviewStats,
    *,
    tenant: str | None,
    now: datetime,
    workers: Sequence[WorkerBeat] | None,
) -> dict[str, Any]:
    """The ``GET /stats/overview`` body. ``workers`` None: the caller may not see the
    cluster (a tenant-bound key), and ``cluster`` is null."""
    body: dict[str, Any] = {
        "tenantId": tenant,
        "at": format_time(now),
        "byStatus": {status.value: n for status, n in stats.counts.items()},
        "total": sum(stats.counts.values()),
        "dlq": stats.counts.get(Status.DLQ, 0),
        "queueLagSeconds": round(stats.queue_lag(now), 3),
        "oldestDueAt": None if stats.oldest_due_at is None else format_time(stats.oldest_due_at),
        "throughput": {
            "start": format_time(stats.start),
            "minutes": len(stats.completed),
            "completed": list(stats.completed),
            "failed": list(stats.failed),
        },
        "cluster": None,
    }
    if workers is not None:
        leaders = [w for w in workers if w.role == "scheduler" and w.leader]
        body["cluster"] = {
            "leader": leaders[0].to_json(now) if leaders else None,
            "leaders": len(leaders),
            "schedulers": [w.to_json(now) for w in workers if w.role == "scheduler"],
            "executors": [w.to_json(now) for w in workers if w.role == "executor"],
        }
    return body


__all__ = [
    "SERIES_MINUTES",
    "OverviewStats",
    "all_statuses",
    "overview_to_json",
    "series_start",
]
