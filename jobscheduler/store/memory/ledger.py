"""The memory store's cron ledger, and the templates holding a buffered fire time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jobscheduler.domain.cron import Occurrence
from jobscheduler.domain.model import Job, utc
from jobscheduler.store.jobs import OccurrenceQuery
from jobscheduler.store.query import BUFFERED

from .codec import job_out, keep
from .conn import MemoryConnection


class Ledger:
    """One record per (template id, fire time): the first one written stays, unchanged."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, datetime], Occurrence] = {}

    def record(self, records: Sequence[Occurrence]) -> list[tuple[Occurrence, bool]]:
        """Store each record unless its key is recorded (by an earlier call or earlier in
        this one); the stored record of each key and whether this call wrote it, in order."""
        answers: list[tuple[Occurrence, bool]] = []
        for record in records:
            key = (record.template_id, utc(record.fire_at))
            stored = self._records.get(key)
            if stored is None:
                self._records[key] = stored = keep(record)
                answers.append((stored, True))
            else:
                answers.append((stored, False))
        return answers

    def select(self, query: OccurrenceQuery, limit: int) -> list[Occurrence]:
        """The records ``query`` selects, newest fire time first, at most ``limit``."""
        cutoff = None if query.before is None else utc(query.before)
        found = [
            record
            for (template, fire_at), record in self._records.items()
            if template == query.template_id
            and (cutoff is None or fire_at < cutoff)
            and (query.statuses is None or record.status in query.statuses)
            and (query.tenant is None or record.tenant_id == query.tenant)
        ]
        found.sort(key=lambda r: r.fire_at, reverse=True)
        return found[:limit]

    def prune(self, before: datetime) -> int:
        """Delete the records recorded before ``before``; how many."""
        cutoff = utc(before)
        old = [key for key, record in self._records.items() if record.recorded_at < cutoff]
        for key in old:
            del self._records[key]
        return len(old)


class MemoryLedgerMixin(MemoryConnection):
    """The cron ledger beside the jobs, and the templates that hold a buffered fire time."""

    def __init__(self) -> None:
        super().__init__()
        self._ledger = Ledger()

    async def record_occurrences(
        self, records: Sequence[Occurrence]
    ) -> list[tuple[Occurrence, bool]]:
        await self._enter()
        return self._ledger.record(records)

    async def occurrences(self, query: OccurrenceQuery, *, limit: int) -> list[Occurrence]:
        await self._enter()
        return self._ledger.select(query, limit)

    async def prune_occurrences(self, before: datetime) -> int:
        await self._enter()
        return self._ledger.prune(before)

    async def buffered_templates(self, limit: int) -> list[Job]:
        await self._enter()
        held = [job for job in self._jobs if BUFFERED.matches(job)]
        held.sort(key=lambda job: (job.cron_buffered, job.id))
        return [job_out(job) for job in held[:limit]]
