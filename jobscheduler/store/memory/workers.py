"""The memory store's presence records and the Overview's figures."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.overview import SERIES_MINUTES, OverviewStats, series_start
from jobscheduler.domain.workers import WorkerBeat
from jobscheduler.store.query import counts_from

from .codec import keep
from .conn import MemoryConnection
from .query import oldest_due

_MINUTE = timedelta(minutes=1)


def finished_per_minute(jobs: Iterable[Job], status: Status, start: datetime) -> tuple[int, ...]:
    """How many of ``jobs`` ended in ``status`` (by ``updated_at``) in each of the
    :data:`SERIES_MINUTES` minutes from ``start``."""
    buckets = [0] * SERIES_MINUTES
    for job in jobs:
        if job.status is status and job.updated_at >= start:
            index = (job.updated_at - start) // _MINUTE
            if index < SERIES_MINUTES:
                buckets[index] += 1
    return tuple(buckets)


class MemoryWorkersMixin(MemoryConnection):
    """One presence record per process id (a beat replaces the previous one), and the
    Overview's figures computed from the jobs table."""

    def __init__(self) -> None:
        super().__init__()
        self._workers: dict[str, WorkerBeat] = {}

    async def beat_worker(self, beat: WorkerBeat) -> None:
        await self._enter()
        self._workers[beat.id] = keep(beat)

    async def live_workers(self, now: datetime) -> list[WorkerBeat]:
        await self._enter()
        at = utc(now)
        live = [beat for beat in self._workers.values() if beat.expires_at > at]
        return sorted(live, key=lambda beat: (beat.role, beat.id))

    async def forget_worker(self, worker_id: str) -> None:
        await self._enter()
        self._workers.pop(worker_id, None)

    async def prune_workers(self, now: datetime) -> int:
        await self._enter()
        at = utc(now)
        expired = [wid for wid, beat in self._workers.items() if beat.expires_at <= at]
        for worker_id in expired:
            del self._workers[worker_id]
        return len(expired)

    async def overview_stats(self, tenant_id: str | None, now: datetime) -> OverviewStats:
        await self._enter()
        jobs = [job for job in self._jobs if tenant_id is None or job.tenant_id == tenant_id]
        start = series_start(now)
        return OverviewStats(
            counts=counts_from(self._jobs.counters, tenant_id, None, by_type=False).by_status,
            oldest_due_at=oldest_due(jobs, utc(now)),
            start=start,
            completed=finished_per_minute(jobs, Status.COMPLETED, start),
            failed=finished_per_minute(jobs, Status.DLQ, start),
        )
