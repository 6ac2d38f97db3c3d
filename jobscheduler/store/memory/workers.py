"""The memory store's presence records and the Overview's figures."""

from __future__ import annotations

from datetime import datetime

from jobscheduler.domain.model import Status, utc
from jobscheduler.domain.overview import OverviewStats, series_start
from jobscheduler.domain.workers import WorkerBeat
from jobscheduler.store.ends import series_of, step_of
from jobscheduler.store.query import counts_from

from .codec import keep
from .conn import MemoryConnection
from .query import oldest_due


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
        series = series_of(self._jobs.end_counts(tenant_id, step_of(start)), start)
        return OverviewStats(
            counts=counts_from(self._jobs.counters, tenant_id, None, by_type=False).by_status,
            oldest_due_at=oldest_due(jobs, utc(now)),
            start=start,
            completed=series[Status.COMPLETED],
            failed=series[Status.DLQ],
        )
