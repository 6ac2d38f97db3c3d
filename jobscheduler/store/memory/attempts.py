"""The memory store's attempt records: one per (job, run, number, outcome), the first kept."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jobscheduler.domain.attempts import Attempt, Outcome
from jobscheduler.domain.model import utc

from .codec import keep
from .conn import MemoryConnection

AttemptKey = tuple[int, int, Outcome]


class AttemptLog:
    """Attempt records by job id, unique by (run, number, outcome) within a job: a second
    record with a key already recorded is ignored (``INSERT OR IGNORE``, as in SQLite)."""

    def __init__(self) -> None:
        self._records: dict[str, dict[AttemptKey, Attempt]] = {}

    def add(self, record: Attempt) -> bool:
        """Append ``record`` unless its key is recorded; whether it was appended."""
        records = self._records.setdefault(record.job_id, {})
        key = (record.run, record.number, record.outcome)
        if key in records:
            return False
        records[key] = keep(record)
        return True

    def of(self, job_id: str) -> list[Attempt]:
        """The job's records, oldest first: by run, number, then finish time."""
        records = self._records.get(job_id, {}).values()
        return sorted(records, key=lambda r: (r.run, r.number, r.finished_at))

    def forget(self, job_id: str) -> None:
        """Delete every record of the job."""
        self._records.pop(job_id, None)

    def prune(self, before: datetime) -> int:
        """Delete the records that finished before ``before``; how many."""
        cutoff = utc(before)
        deleted = 0
        for job_id, records in list(self._records.items()):
            old = [key for key, record in records.items() if record.finished_at < cutoff]
            for key in old:
                del records[key]
            deleted += len(old)
            if not records:
                del self._records[job_id]
        return deleted


class MemoryAttemptsMixin(MemoryConnection):
    """The attempt log of the store (written by the store's transitions) and its reads."""

    def __init__(self) -> None:
        super().__init__()
        self._attempts = AttemptLog()

    async def attempts(self, job_id: str, *, tenant: str | None = None) -> list[Attempt]:
        await self._enter()
        if tenant is not None and self._jobs.get(job_id, tenant) is None:
            return []
        return self._attempts.of(job_id)

    async def attempts_of(self, job_ids: Sequence[str]) -> dict[str, list[Attempt]]:
        await self._enter()
        return {job_id: found for job_id in job_ids if (found := self._attempts.of(job_id))}

    async def record_attempts(self, records: Sequence[Attempt]) -> None:
        await self._enter()
        for record in records:
            self._attempts.add(record)

    async def prune_attempts(self, before: datetime) -> int:
        await self._enter()
        return self._attempts.prune(before)
