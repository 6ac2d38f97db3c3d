"""The memory store's management reads: job filters with keyset pages, and stats.

Filters are :meth:`JobQuery.matches <jobscheduler.store.query.JobQuery.matches>`, the
conditions the other adapters compile to their query languages, evaluated as they are.
Pages follow the query's :class:`~jobscheduler.store.query.Sort` (the time field, then the
id, both in its direction) and continue strictly after a :class:`Cursor`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from jobscheduler.domain.model import Job, utc
from jobscheduler.store.ends import stats_first_step, windows_of
from jobscheduler.store.query import (
    DUE_ONE_OFF,
    Cursor,
    JobCounts,
    JobQuery,
    JobStats,
    Statuses,
    counts_from,
    keyset_page,
)

from .codec import job_out
from .conn import MemoryConnection


def oldest_due(jobs: Iterable[Job], now: datetime) -> datetime | None:
    """The ``scheduled_at`` of the oldest due one-off job of ``jobs`` at ``now`` (None:
    none is)."""
    due = DUE_ONE_OFF.due(now)
    return min((job.scheduled_at for job in jobs if due.matches(job)), default=None)


def page(jobs: Iterable[Job], query: JobQuery, limit: int, after: Cursor | None) -> list[Job]:
    """The first ``limit`` of ``jobs`` matching ``query``, in its order, after ``after``."""
    found = [job for job in jobs if query.matches(job)]
    return keyset_page(found, query.sort, limit, after)


def count(
    jobs: Iterable[Job], tenant_id: str | None, statuses: Statuses, by_type: bool
) -> JobCounts:
    """The memory store's one count (see :meth:`JobStore.count_jobs
    <jobscheduler.store.base.JobStore.count_jobs>`)."""
    counted = JobQuery(tenant_id=tenant_id, statuses=tuple(statuses or ()))
    mine = [job for job in jobs if counted.matches(job)]
    if by_type:
        return JobCounts.of_types(statuses, Counter((job.status, job.job_type) for job in mine))
    return JobCounts.of_statuses(statuses, Counter(job.status for job in mine))


class MemoryQueryMixin(MemoryConnection):
    """Filtered listing and statistics over the jobs table."""

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        await self._enter()
        return [job_out(job) for job in page(self._jobs, query, limit, after)]

    async def count_jobs(
        self, tenant_id: str | None, statuses: Statuses = None, *, by_type: bool = False
    ) -> JobCounts:
        """From the counters the jobs table keeps (:func:`count` is the recount)."""
        await self._enter()
        return counts_from(self._jobs.counters, tenant_id, statuses, by_type)

    async def tenants(self, limit: int) -> list[str]:
        await self._enter()
        return sorted({job.tenant_id for job in self._jobs})[: max(limit, 0)]

    async def stats(self, tenant_id: str | None, now: datetime) -> JobStats:
        await self._enter()
        mine = JobQuery(tenant_id=tenant_id)
        counted = counts_from(self._jobs.counters, tenant_id, None, by_type=True)
        ends = self._jobs.end_counts(tenant_id, stats_first_step(now))
        return JobStats(
            counts=counted.by_type or {},
            oldest_due_at=oldest_due((job for job in self._jobs if mine.matches(job)), utc(now)),
            windows=windows_of(ends, now),
        )
