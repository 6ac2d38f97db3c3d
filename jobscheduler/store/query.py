"""What the management routes ask the store: job filters, keyset cursors and stats.

A :class:`JobQuery` is a conjunction of optional conditions; every adapter turns it into
one indexed query. Pages are newest first (``created_at`` desc, then ``id`` desc) and a
:class:`Cursor` is the position of the last job of a page, so the next page starts
strictly after it: pages stay stable while jobs change status (``created_at`` never does).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import attrs

from ..model import Job, Status

#: The windows of ``GET /stats`` completions and failures, in minutes.
STATS_WINDOWS: tuple[int, ...] = (1, 5, 15)


@attrs.frozen(kw_only=True)
class JobQuery:
    """Jobs matching every given condition (None / empty: no condition)."""

    #: None: every tenant (an all-tenant admin only).
    tenant_id: str | None
    statuses: tuple[Status, ...] = ()
    job_type: str | None = None
    template_id: str | None = None
    #: True: cron templates only; False: everything but templates.
    cron: bool | None = None
    #: ``created_at >= created_after`` and ``created_at < created_before``.
    created_after: datetime | None = None
    created_before: datetime | None = None

    def matches(self, job: Job) -> bool:
        """The same conditions in Python (tests, and a store without a query language)."""
        return (
            (self.tenant_id is None or job.tenant_id == self.tenant_id)
            and (not self.statuses or job.status in self.statuses)
            and (self.job_type is None or job.job_type == self.job_type)
            and (self.template_id is None or job.template_id == self.template_id)
            and (self.cron is None or (job.cron is not None) == self.cron)
            and (self.created_after is None or job.created_at >= self.created_after)
            and (self.created_before is None or job.created_at < self.created_before)
        )


@attrs.frozen(kw_only=True)
class Cursor:
    """The position of a job in the newest-first order: a page continues after it."""

    created_at: datetime
    id: str

    @classmethod
    def after(cls, job: Job) -> Cursor:
        return cls(created_at=job.created_at, id=job.id)


@attrs.frozen(kw_only=True)
class Window:
    """Jobs that finished in the last ``minutes``."""

    minutes: int
    completed: int
    failed: int


@attrs.frozen(kw_only=True)
class JobStats:
    """What ``GET /stats`` reports (and the reaper exports as gauges)."""

    #: (status, job type) -> how many jobs.
    counts: Mapping[tuple[Status, str], int]
    #: ``scheduled_at`` of the oldest due pending one-off job (None: nothing is waiting).
    oldest_due_at: datetime | None
    windows: tuple[Window, ...]

    def queue_lag(self, now: datetime) -> float:
        """Seconds the oldest due pending job has waited past its ``scheduledAt``."""
        if self.oldest_due_at is None:
            return 0.0
        return max((now - self.oldest_due_at) / timedelta(seconds=1), 0.0)


__all__ = ["STATS_WINDOWS", "Cursor", "JobQuery", "JobStats", "Window"]
