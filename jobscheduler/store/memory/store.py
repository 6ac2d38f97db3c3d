"""The in-memory JobStore: every table a Python dict, every call atomic between checkpoints.

For tests: the roles' and the API's unit tests run on it under trio's ``MockClock``, with
no thread and no file (nothing survives the process). It keeps the promises of the port
as the SQLite and MongoDB adapters do, and runs their contract suite (``tests/contract``):

- the unique indexes: (tenant, idempotency key) -- a second insert raises DuplicateJob
  naming the holder --, a cron run's (template id, fire time), the ledger's (template,
  fire time) and the attempt records' (job, run, number, outcome), first record kept;
  API key and audit record ids;
- every transition one conditional update: a :class:`~jobscheduler.domain.states.Change`
  applies only if the job holds every expectation (status, claim token, old fire time,
  ...), else nothing changes and the caller is told it lost;
- the same orders (claims by priority, then oldest ``scheduled_at``, then id; keyset
  pages in every :class:`~jobscheduler.store.query.Sort`) and the same errors (JobNotFound,
  StoreError once closed);
- values are copied in and out (a caller never shares a payload with the store) and times
  are kept in whole milliseconds, as the other adapters keep them.

Every method first takes one trio checkpoint (:mod:`.conn`), so concurrent calls in a
test interleave like real round trips; the work after it runs without a checkpoint, which
makes each call (``insert_many`` and ``apply_many`` included) one atomic step.

The store is cut along the seams of the other adapters: :mod:`.conn` (open/close and the
checkpoint), :mod:`.codec` (copies, times, the jobs table and its unique indexes), this
module (inserts, reads, claims, transitions), :mod:`.attempts`, :mod:`.ledger`,
:mod:`.query` (filters, pages, stats), :mod:`.tenancy`, :mod:`.upkeep` (counters, pruning),
:mod:`.workers`, :mod:`.workflows` and :mod:`.flow` (fair claims, slots, rate buckets).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import attrs

from jobscheduler.domain.audit import AuditRecord
from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.states import Change, claim_fields, release_step, settle_step
from jobscheduler.errors import StoreError
from jobscheduler.store.base import InsertOutcome, JobStore
from jobscheduler.store.inserts import duplicate_of, first_of_each_key, spread_outcomes
from jobscheduler.store.jobs import found
from jobscheduler.store.query import DUE_ONE_OFF, DUE_TEMPLATE, PENDING, JobQuery

from .codec import holds, job_in, job_out, of_tenant, value_in
from .flow import MemoryFlowMixin
from .ledger import MemoryLedgerMixin
from .notifications import MemoryNotificationsMixin
from .query import MemoryQueryMixin
from .tenancy import MemoryTenancyMixin
from .upkeep import MemoryUpkeepMixin
from .workers import MemoryWorkersMixin
from .workflows import MemoryWorkflowsMixin

#: The time fields the reaper's sweeps look at (:meth:`MemoryJobStore.find_stale`).
STALE_FIELDS = frozenset({"queued_at", "heartbeat_at"})

_NEVER = datetime.min.replace(tzinfo=UTC)


class MemoryJobStore(
    MemoryWorkflowsMixin,
    MemoryFlowMixin,
    MemoryNotificationsMixin,
    MemoryWorkersMixin,
    MemoryQueryMixin,
    MemoryTenancyMixin,
    MemoryLedgerMixin,
    MemoryUpkeepMixin,
    JobStore,
):
    """JobStore in this process's memory (see the module doc for what it promises)."""

    # ------------------------------------------------------------------ inserts

    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        """Store the job and, with it, ``audit``: both or neither."""
        await self._enter()
        stored = job_in(job)
        broken = self._jobs.conflict(stored)
        if broken == "id":
            raise StoreError(f"insert failed: job id {job.id} is taken")
        if broken is not None:
            raise duplicate_of(job, self._jobs.holder(job.tenant_id, job.idempotency_key))
        if audit is not None:
            self._audit.append(audit)  # raises before the job is stored, if it must
        self._jobs.add(stored)
        return job_out(stored)

    async def insert_many(self, jobs: Sequence[Job]) -> list[InsertOutcome]:
        await self._enter()
        unique, later = first_of_each_key(jobs)
        stored: list[InsertOutcome] = []
        for job in unique:
            kept = job_in(job)
            if self._jobs.conflict(kept) is None:
                self._jobs.add(kept)
                stored.append(job_out(kept))
            else:
                holder = self._jobs.holder(job.tenant_id, job.idempotency_key)
                stored.append(duplicate_of(job, holder))
        return spread_outcomes(jobs, stored, later)

    # ------------------------------------------------------------------ reads

    async def get(self, job_id: str, *, tenant: str | None = None) -> Job:
        await self._enter()
        return job_out(found(self._jobs.get(job_id, tenant), job_id))

    async def find_run(
        self, template_id: str, fire_at: datetime, *, tenant: str | None = None
    ) -> Job | None:
        await self._enter()
        run = self._jobs.run(template_id, fire_at)
        return None if run is None or not of_tenant(run, tenant) else job_out(run)

    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        await self._enter()
        templates = DUE_TEMPLATE.due(now)
        due = [job for job in self._jobs if templates.matches(job)]
        due.sort(key=lambda job: (job.scheduled_at, job.id))
        return [job_out(job) for job in due[:limit]]

    async def next_due_at(self) -> datetime | None:
        await self._enter()
        pending = (job.scheduled_at for job in self._jobs if PENDING.matches(job))
        return min(pending, default=None)

    async def find_stale(
        self, statuses: Sequence[Status], field: str, before: datetime, limit: int
    ) -> list[Job]:
        """A job whose ``field`` is unset counts as stale; oldest (unset) first."""
        if field not in STALE_FIELDS:
            raise ValueError(f"find_stale: field must be one of {sorted(STALE_FIELDS)}")
        await self._enter()
        wanted = {Status(status) for status in statuses}
        cutoff = utc(before)

        def age(job: Job) -> datetime:
            value: datetime | None = getattr(job, field)
            return _NEVER if value is None else value

        stale = [job for job in self._jobs if job.status in wanted and age(job) < cutoff]
        stale.sort(key=lambda job: (age(job), job.id))
        return [job_out(job) for job in stale[:limit]]

    # ------------------------------------------------------------------ claims, transitions

    async def claim_due(self, now: datetime, limit: int) -> list[Job]:
        await self._enter()
        one_offs = DUE_ONE_OFF.due(now)
        due = [job for job in self._jobs if one_offs.matches(job)]
        due.sort(key=lambda job: (-job.priority, job.scheduled_at, job.id))
        fields = claim_fields(now)
        claimed = []
        for job in due[:limit]:
            queued = attrs.evolve(job, **fields)
            self._jobs.replace(queued)
            claimed.append(job_out(queued))
        return claimed

    async def apply(self, change: Change) -> Job | None:
        await self._enter()
        return self._apply(change)

    async def apply_many(self, changes: Sequence[Change]) -> list[Job | None]:
        """Every change in one atomic step, each applied or not on its own."""
        await self._enter()
        return [self._apply(change) for change in changes]

    async def apply_many_lean(
        self, changes: Sequence[Change], read_back: Sequence[bool]
    ) -> list[Job | bool]:
        await self._enter()
        results: list[Job | bool] = []
        for change, want in zip(changes, read_back, strict=True):
            job = self._apply(change)
            results.append(False if job is None else job if want else True)
        return results

    async def clear_marks(self, steps: Sequence[Job]) -> int:
        return await self.apply_bulk([settle_step(step) for step in steps])

    async def release_spawned(self, spawner: str, now: datetime, limit: int) -> int:
        await self._enter()
        waiting = JobQuery(tenant_id=None, spawned_by=spawner, statuses=(Status.WAITING,))
        children = [job for job in self._jobs if waiting.matches(job)][:limit]
        return sum(self._apply(release_step(job, now=now)) is not None for job in children)

    def _apply(self, change: Change) -> Job | None:
        """Apply ``change`` if the job holds its expectations (with its attempt record);
        the job as updated, or None."""
        job = self._jobs.get(change.job_id)
        if job is None or not holds(job, change.expect):
            return None
        values = {field: value_in(field, value) for field, value in change.set.items()}
        for field, amount in change.inc.items():
            values[field] = getattr(job, field) + amount
        updated = attrs.evolve(job, **values)
        try:
            self._jobs.replace(updated)
        except ValueError as exc:
            raise StoreError(f"{change.transition} of job {change.job_id} refused: {exc}") from None
        if change.record is not None:
            self._attempts.add(change.record)
        if change.events:
            self._events.add(change.events)
        return job_out(updated)
