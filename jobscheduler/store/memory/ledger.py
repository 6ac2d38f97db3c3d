"""The memory store's cron ledger, and the templates holding a buffered fire time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jobscheduler.domain.cron import Occurrence, OccurrenceStatus
from jobscheduler.domain.model import Job, utc
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

    def select(
        self,
        template_id: str,
        before: datetime | None,
        limit: int,
        statuses: Sequence[OccurrenceStatus] | None,
        tenant: str | None = None,
    ) -> list[Occurrence]:
        """A template's records, newest fire time first, older than ``before``, in
        ``statuses`` and of ``tenant``, when given."""
        cutoff = None if before is None else utc(before)
        found = [
            record
            for (template, fire_at), record in self._records.items()
            if template == template_id
            and (cutoff is None or fire_at < cutoff)
            and (statuses is None or record.status in statuses)
            and (tenant is None or record.tenant_id == tenant)
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

    async def occurrences(
        self,
        template_id: str,
        *,
        limit: int,
        before: datetime | None = None,
        statuses: Sequence[OccurrenceStatus] | None = None,
        tenant: str | None = None,
    ) -> list[Occurrence]:
        await self._enter()
        return self._ledger.select(template_id, before, limit, statuses, tenant)

    async def prune_occurrences(self, before: datetime) -> int:
        await self._enter()
        return self._ledger.prune(before)

    async def buffered_templates(self, limit: int) -> list[Job]:
        await self._enter()
        held = [job for job in self._jobs if BUFFERED.matches(job)]
        held.sort(key=lambda job: (job.cron_buffered, job.id))
        return [job_out(job) for job in held[:limit]]
