"""The job store's ports for the jobs themselves: storing and reading them
(:class:`JobRecords`), their state changes (:class:`Transitions`), the cron templates' ledger
(:class:`CronLedger`) and the attempt records (:class:`AttemptLog`). Part of
:class:`~jobscheduler.store.base.JobStore` (the union of the ports), whose module states the
contract they share."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import attrs

from jobscheduler.domain.attempts import Attempt
from jobscheduler.domain.audit import AuditRecord
from jobscheduler.domain.cron import Occurrence, OccurrenceStatus
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import Change
from jobscheduler.errors import DuplicateJob, JobNotFound, ValidationError

#: What :meth:`JobRecords.insert_many` answers for each job, in order: the job as stored, or
#: the reason it was not stored (DuplicateJob with ``existing_id``, or ValidationError).
InsertOutcome = Job | DuplicateJob | ValidationError

#: Most jobs one :meth:`JobRecords.insert_many` call accepts.
MAX_INSERT_MANY = 1000


class JobRecords(Protocol):
    """New jobs, and one job read by its id or by its cron run's identity."""

    @abc.abstractmethod
    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        """Store a new job and return it as stored.

        Raises DuplicateJob if its idempotencyKey is already used (also under concurrent
        inserts: exactly one of several racing inserts of one key succeeds); its
        ``existing_id`` is the id of the job holding the key.

        ``audit`` is the create's audit record, written only if the job is, in the same
        round trip: in the job's transaction where the store has them (SQLite); right
        after the job in the same call otherwise (MongoDB: no multi-document transactions),
        where a failure to write it is logged and does not undo the create.
        """

    @abc.abstractmethod
    async def insert_many(self, jobs: Sequence[Job]) -> list[InsertOutcome]:
        """Store up to :data:`MAX_INSERT_MANY` new jobs in as few round trips as the store
        allows; one outcome per job, in order.

        Each job succeeds or fails on its own (not a transaction). A job whose key is
        already used gets DuplicateJob with the holder's ``existing_id``; within the batch
        the first job of a key wins and later ones get DuplicateJob naming it (or its
        holder). A job the store cannot hold gets ValidationError. A driver failure raises
        StoreError (then any of the jobs may or may not be stored).
        """

    @abc.abstractmethod
    async def get(self, job_id: str, *, tenant: str | None = None) -> Job:
        """Return the job; raise JobNotFound if no job has this id, or if ``tenant`` is
        given and the job is another tenant's."""

    @abc.abstractmethod
    async def find_run(
        self, template_id: str, fire_at: datetime, *, tenant: str | None = None
    ) -> Job | None:
        """The run the template spawned for this fire time, or None (also when ``tenant``
        is given and the run is another tenant's).

        A run is identified by (``template_id``, ``fire_at``) with a unique index of its own:
        inserting a second job with the same pair raises DuplicateJob, whatever its key.
        """


def found(job: Job | None, job_id: str) -> Job:
    """What :meth:`JobRecords.get` answers when its read of ``job_id`` found ``job``: the
    job, or JobNotFound if there is none."""
    if job is None:
        raise JobNotFound(f"job {job_id} not found")
    return job


class Transitions(Protocol):
    """The scheduler's claims and every role's conditional updates (the state machine's
    transitions), and the reads that find the jobs to move."""

    @abc.abstractmethod
    async def claim_due(self, now: datetime, limit: int) -> list[Job]:
        """Atomically move up to ``limit`` due one-off jobs from pending to queued.

        Due is :data:`~jobscheduler.store.query.DUE_ONE_OFF` at ``now``. Highest priority
        first, then oldest ``scheduled_at``; the returned list is in that order. A job is
        returned by at most one of any number of concurrent callers. Writes
        ``states.claim_fields(now)``. A cancelled call may stop waiting for a claim already
        under way: its jobs may then be queued with nobody told, which the reaper's queued
        sweep repairs.
        """

    @abc.abstractmethod
    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        """Cron templates due at ``now`` (:data:`~jobscheduler.store.query.DUE_TEMPLATE`),
        oldest ``scheduled_at`` first, at most ``limit`` (read only)."""

    @abc.abstractmethod
    async def next_due_at(self) -> datetime | None:
        """The earliest ``scheduled_at`` among pending jobs, one-offs and templates
        (:data:`~jobscheduler.store.query.PENDING`), or None."""

    @abc.abstractmethod
    async def apply(self, change: Change) -> Job | None:
        """Apply one conditional update atomically.

        Returns the job as updated, or None when the job does not exist or any expectation
        does not hold (the caller lost a race). Never partially applies. When the change
        applies and carries a ``record``, the attempt record is appended beside the job
        (see :class:`AttemptLog`): in the same transaction where the store has them, else
        right after, in the same call; a second record with the same key is ignored.
        """

    async def apply_many(self, changes: Sequence[Change]) -> list[Job | None]:
        """Apply independent changes; results in order. Adapters may batch them."""
        return [await self.apply(change) for change in changes]

    async def apply_many_lean(
        self, changes: Sequence[Change], read_back: Sequence[bool]
    ) -> list[Job | bool]:
        """As :meth:`apply_many` (same atomicity, same round trip), for callers that need
        some jobs back and only a yes/no for the others. Each result is False when its change
        did not apply; else the updated job where ``read_back`` is true, and True where it is
        false. Adapters may skip reading back the jobs not asked for (SQLite does: that is
        most of a transition's cost there); this default reads every one."""
        results = await self.apply_many(changes)
        return [
            False if job is None else job if want else True
            for job, want in zip(results, read_back, strict=True)
        ]

    async def apply_bulk(self, changes: Sequence[Change]) -> int:
        """Apply independent changes (as :meth:`apply_many`); returns how many applied.
        Adapters may send them in one round trip without reading the jobs back."""
        return sum(job is not None for job in await self.apply_many(changes))

    @abc.abstractmethod
    async def find_stale(
        self, statuses: Sequence[Status], field: str, before: datetime, limit: int
    ) -> list[Job]:
        """Jobs in one of ``statuses`` whose time ``field`` (``queued_at`` or
        ``heartbeat_at``) is older than ``before`` (read only; the reaper's query)."""


@attrs.frozen
class OccurrenceQuery:
    """A cron template's ledger records matching every given condition (None: no
    condition)."""

    template_id: str
    #: Fire times older than this.
    before: datetime | None = None
    #: Records in one of these statuses.
    statuses: Sequence[OccurrenceStatus] | None = None
    #: The template's tenant: another tenant's template has no records, as an unknown one.
    tenant: str | None = None


class CronLedger(Protocol):
    """The per-fire-time ledger of cron templates, beside the jobs, and the templates that
    hold a buffered fire time."""

    @abc.abstractmethod
    async def record_occurrences(
        self, records: Sequence[Occurrence]
    ) -> list[tuple[Occurrence, bool]]:
        """Append cron ledger records, each unless its (template id, fire time) is recorded
        already; return, in order, the record stored under each key (the given one, or the
        one a concurrent or earlier writer stored first, never changed) and whether this
        call wrote it."""

    @abc.abstractmethod
    async def occurrences(self, query: OccurrenceQuery, *, limit: int) -> list[Occurrence]:
        """The ledger records ``query`` selects, newest fire time first, at most
        ``limit``."""

    @abc.abstractmethod
    async def prune_occurrences(self, before: datetime) -> int:
        """Delete ledger records recorded before ``before``; returns how many."""

    @abc.abstractmethod
    async def buffered_templates(self, limit: int) -> list[Job]:
        """Templates holding a buffered fire time (:data:`~jobscheduler.store.query.BUFFERED`),
        oldest buffer first, at most ``limit`` (read only)."""


class AttemptLog(Protocol):
    """The attempt records of the jobs, beside them (written by :meth:`Transitions.apply`)."""

    @abc.abstractmethod
    async def attempts(self, job_id: str, *, tenant: str | None = None) -> list[Attempt]:
        """The attempt records of a job, oldest first (by run, number, then finish time);
        empty for an unknown job, and, when ``tenant`` is given, for another tenant's."""

    @abc.abstractmethod
    async def attempts_of(self, job_ids: Sequence[str]) -> dict[str, list[Attempt]]:
        """The attempt records of these jobs (of any tenant), by job id, each job's oldest
        first as :meth:`attempts` gives them; a job without a record is left out. For the
        reaper's archive, a batch of pruned jobs at a time."""

    @abc.abstractmethod
    async def record_attempts(self, records: Sequence[Attempt]) -> None:
        """Append these records unless their key (job, run, number, outcome) is recorded
        already (the first record is kept): for a writer that learns only afterwards that
        its transition applied (a reply lost, a retry that finds its own write) and must not
        leave the attempt unrecorded."""

    @abc.abstractmethod
    async def prune_attempts(self, before: datetime) -> int:
        """Delete attempt records that finished before ``before``; returns how many."""
