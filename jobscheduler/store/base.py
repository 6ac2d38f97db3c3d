"""The JobStore port: the single source of truth for every job.

Every adapter (SQLite embedded, MongoDB production) passes the one contract suite in
``tests/contract/test_store_contract.py``. Methods raise only this package's errors
(:class:`~jobscheduler.errors.StoreError` for driver failures, whose outcome may be unknown).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime

from ..audit import AuditQuery, AuditRecord
from ..keys import ApiKey
from ..model import Job, Status
from ..states import Change


class JobStore(abc.ABC):
    """Persistence of jobs; every state change is one atomic conditional update."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect and create the schema / indexes. Idempotent. No I/O happens before this."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections. Safe to call twice."""

    async def ping(self) -> None:
        """Return once the store answers a trivial request; raise StoreError if it cannot.

        Cheap (no scan) and cancellable: a blocking driver call runs in a thread that is
        abandoned on cancellation, so a readiness probe with a deadline always returns in
        time. Adapters override this default, which reads the next due time.
        """
        await self.next_due_at()

    @abc.abstractmethod
    async def insert(self, job: Job) -> Job:
        """Store a new job and return it as stored.

        Raises DuplicateJob if its idempotencyKey is already used (also under concurrent
        inserts: exactly one of several racing inserts of one key succeeds).
        """

    @abc.abstractmethod
    async def get(self, job_id: str) -> Job:
        """Return the job; raise JobNotFound if no job has this id."""

    @abc.abstractmethod
    async def list_jobs(self, tenant_id: str, status: Status | None, limit: int) -> list[Job]:
        """A tenant's jobs, newest ``created_at`` first (ties: newest id first), at most
        ``limit`` of them."""

    @abc.abstractmethod
    async def claim_due(self, now: datetime, limit: int) -> list[Job]:
        """Atomically move up to ``limit`` due one-off jobs from pending to queued.

        Due means status pending, no cron, ``scheduled_at <= now``. Highest priority first,
        then oldest ``scheduled_at``; the returned list is in that order. A job is returned by
        at most one of any number of concurrent callers. Writes ``states.claim_fields(now)``.
        """

    @abc.abstractmethod
    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        """Pending cron templates whose ``scheduled_at <= now`` (read only), oldest first."""

    @abc.abstractmethod
    async def next_due_at(self) -> datetime | None:
        """The earliest ``scheduled_at`` among pending jobs (one-offs and templates), or None."""

    @abc.abstractmethod
    async def apply(self, change: Change) -> Job | None:
        """Apply one conditional update atomically.

        Returns the job as updated, or None when the job does not exist or any expectation
        does not hold (the caller lost a race). Never partially applies.
        """

    async def apply_many(self, changes: Sequence[Change]) -> list[Job | None]:
        """Apply independent changes; results in order. Adapters may batch them."""
        return [await self.apply(change) for change in changes]

    @abc.abstractmethod
    async def find_stale(
        self, statuses: Sequence[Status], field: str, before: datetime, limit: int
    ) -> list[Job]:
        """Jobs in one of ``statuses`` whose time ``field`` (``queued_at`` or
        ``heartbeat_at``) is older than ``before`` (read only; the reaper's query)."""

    @abc.abstractmethod
    async def count_by_status(self) -> dict[Status, int]:
        """How many jobs are in each status (for operators and benchmarks)."""

    # ------------------------------------------------------------------ tenancy

    @abc.abstractmethod
    async def find_run(self, template_id: str, fire_at: datetime) -> Job | None:
        """The run the template spawned for this fire time, or None.

        A run is identified by (``template_id``, ``fire_at``) with a unique index of its own:
        inserting a second job with the same pair raises DuplicateJob, whatever its key.
        """

    @abc.abstractmethod
    async def count_unfinished(self, tenant_id: str) -> int:
        """How many of the tenant's jobs are pending, queued, claimed or running (cron
        templates included: they are pending until removed)."""

    @abc.abstractmethod
    async def insert_key(self, key: ApiKey) -> ApiKey:
        """Store a new API key (its id is random and fresh; a clash is a StoreError)."""

    @abc.abstractmethod
    async def get_key(self, key_id: str) -> ApiKey | None:
        """The key with this id (revoked ones included), or None."""

    @abc.abstractmethod
    async def list_keys(self, tenant_id: str | None) -> list[ApiKey]:
        """Every key (revoked ones included), oldest first; only the keys bound to
        ``tenant_id`` when it is given."""

    @abc.abstractmethod
    async def revoke_key(self, key_id: str, now: datetime) -> ApiKey | None:
        """Mark the key revoked at ``now`` (a key already revoked keeps its first
        ``revoked_at``); returns the key as stored, or None for an unknown id."""

    @abc.abstractmethod
    async def append_audit(self, record: AuditRecord) -> None:
        """Append one record to the audit trail (records are never changed afterwards)."""

    @abc.abstractmethod
    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        """The records ``query`` selects (:meth:`AuditQuery.matches`), newest id first, at
        most ``query.limit``."""

    @abc.abstractmethod
    async def prune_audit(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` records older than ``before``; returns how many."""
