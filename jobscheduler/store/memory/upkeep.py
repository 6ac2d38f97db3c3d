"""The memory store's upkeep: counters kept by the jobs table itself, pruning, and the
retention overrides (see :mod:`jobscheduler.store.upkeep`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.retention import Override, PruneSummary, Scope
from jobscheduler.store.ends import step_of
from jobscheduler.store.query import CountKey, Statuses

from .attempts import MemoryAttemptsMixin
from .codec import job_out, keep


class MemoryUpkeepMixin(MemoryAttemptsMixin):
    """Counters, pruning and retention overrides over the memory tables."""

    def __init__(self) -> None:
        super().__init__()
        self._retention_overrides: dict[tuple[Scope, str], Override] = {}
        self._last_prune: PruneSummary | None = None

    async def job_counters(self, statuses: Statuses = None) -> dict[CountKey, int]:
        await self._enter()
        wanted = None if statuses is None else {Status(s) for s in statuses}
        return {
            key: n
            for key, n in self._jobs.counters.items()
            if n and (wanted is None or key[1] in wanted)
        }

    async def reconcile_counts(self) -> dict[CountKey, tuple[int, int]]:
        await self._enter()
        kept, actual = self._jobs.counters, self._jobs.recount()
        wrong = {
            key: (kept[key], actual[key])
            for key in set(kept) | set(actual)
            if kept[key] != actual[key]
        }
        for key, (_, n) in wrong.items():
            kept[key] = n
        return wrong

    async def forget_ends(self, before: datetime) -> int:
        await self._enter()
        return self._jobs.forget_ends(step_of(before))

    async def expired_jobs(self, key: CountKey, before: datetime, limit: int) -> list[Job]:
        await self._enter()
        tenant, status, job_type = key
        cutoff = utc(before)
        found = [
            job
            for job in self._jobs
            if (job.tenant_id, job.status, job.job_type) == (tenant, status, job_type)
            and job.cron is None
            and job.workflow_id is None  # steps are kept with their workflow
            and job.finished_at is not None
            and job.finished_at < cutoff
        ]
        found.sort(key=lambda job: (job.finished_at, job.id))
        return [job_out(job) for job in found[:limit]]

    async def delete_jobs(self, jobs: Sequence[Job]) -> int:
        await self._enter()
        deleted = 0
        for job in jobs:
            current = self._jobs.get(job.id)
            finished = None if job.finished_at is None else utc(job.finished_at)
            if current is None or (current.status, current.finished_at) != (job.status, finished):
                continue
            self._jobs.remove(job.id)
            self._attempts.forget(job.id)
            deleted += 1
        return deleted

    async def set_retention(self, override: Override) -> None:
        await self._enter()
        if override.keep:
            self._retention_overrides[(override.scope, override.name)] = keep(override)
        else:
            self._retention_overrides.pop((override.scope, override.name), None)

    async def retention_overrides(self) -> list[Override]:
        await self._enter()
        return [self._retention_overrides[key] for key in sorted(self._retention_overrides)]

    async def record_prune(self, summary: PruneSummary) -> None:
        await self._enter()
        self._last_prune = keep(summary)

    async def last_prune(self) -> PruneSummary | None:
        await self._enter()
        return self._last_prune
