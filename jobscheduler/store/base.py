"""The job store's ports, one per role, and :class:`JobStore`, their union.

The store is the single source of truth for every job. Each role asks it for one part of
that truth, so the port is split by role, each part a protocol whose docstrings state its
contract:

========================  ==============================================================
:class:`StoreLifecycle`    open, close, ping (the process assembly, the CLI)
:class:`JobRecords`        store new jobs and read one by id (the API, cron firing)
:class:`Transitions`       claims and conditional updates (scheduler, executor, reaper)
:class:`CronLedger`        the per-fire-time ledger of cron templates (cron firing)
:class:`AttemptLog`        the attempt records beside the jobs (the API; the reaper prunes)
:class:`Tenancy`           API keys and the audit trail (the API's auth and key routes)
:class:`WorkerPresence`    the processes' presence records (schedulers, executors, Overview)
:class:`Reporting`         listing, counts and figures (the API, the reaper's gauges)
:class:`WorkflowRecords`   workflow records and their steps (:mod:`.workflows`)
:class:`FlowControl`       fair claims, limit slots, rate buckets, limits and weights
:class:`Upkeep`            counters, pruning, retention overrides (:mod:`.upkeep`)
:class:`Notifications`     webhooks, events and deliveries (``notifications.py``; the API,
                           the notifier)
========================  ==============================================================

The jobs' own ports (:class:`JobRecords`, :class:`Transitions`, :class:`CronLedger`,
:class:`AttemptLog`) are in :mod:`.jobs`; this module re-exports them.

Every adapter (SQLite embedded, MongoDB production, memory for tests) implements them all
in one class, subclassing :class:`JobStore` (which makes a missing method an error), and
passes the one contract suite in ``tests/contract/test_store_*.py``. ``Deps`` holds a
:class:`JobStore`; code that needs one part only takes that protocol, so a test double
implements that part alone. Methods raise only this package's errors
(:class:`~jobscheduler.errors.StoreError` for driver failures, whose outcome may be
unknown).

**Tenants in the reads by id.** The reads of one job, or of what hangs from it or its
template (:meth:`JobRecords.get`, :meth:`JobRecords.find_run`, :meth:`AttemptLog.attempts`,
:meth:`CronLedger.occurrences`), and of one API key (:meth:`Tenancy.get_key`) take a keyword
``tenant``. None reads whatever has the id (the roles). A tenant puts the tenant in the
query: another tenant's job or key is answered exactly as a missing id is (``get`` raises
JobNotFound, the others answer None or nothing), so no answer tells the caller whether it
exists, and no caller has to remember to check.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from jobscheduler.domain.audit import AuditQuery, AuditRecord
from jobscheduler.domain.flow import FlowReport, LimitOverride, TenantWeight
from jobscheduler.domain.keys import ApiKey
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.overview import OverviewStats
from jobscheduler.domain.states import UNFINISHED
from jobscheduler.domain.workers import WorkerBeat

from .jobs import MAX_INSERT_MANY, AttemptLog, CronLedger, InsertOutcome, JobRecords, Transitions
from .notifications import Notifications
from .query import (
    Candidate,
    Cursor,
    Exclusions,
    JobCounts,
    JobQuery,
    JobStats,
    PassReads,
    Pick,
    Statuses,
)
from .upkeep import Upkeep
from .workflows import WorkflowRecords

__all__ = [
    "MAX_INSERT_MANY",
    "AttemptLog",
    "CronLedger",
    "FlowControl",
    "InsertOutcome",
    "JobRecords",
    "JobStore",
    "Reporting",
    "StoreLifecycle",
    "Tenancy",
    "Transitions",
    "WorkerPresence",
]


class StoreLifecycle(Protocol):
    """Opening and closing a store. No I/O happens before :meth:`start`."""

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect and create the schema / indexes. Idempotent."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections. Safe to call twice."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Return once the store answers a trivial request; raise StoreError if it cannot.

        Cheap (no scan) and cancellable: a blocking driver call runs in a thread that is
        abandoned on cancellation, so a readiness probe with a deadline always returns in
        time.
        """


class Tenancy(Protocol):
    """API keys (their hashes and roles) and the audit trail, beside the jobs."""

    @abc.abstractmethod
    async def insert_key(self, key: ApiKey) -> ApiKey:
        """Store a new API key (its id is random and fresh; a clash is a StoreError)."""

    @abc.abstractmethod
    async def get_key(self, key_id: str, *, tenant: str | None = None) -> ApiKey | None:
        """The key with this id (revoked ones included), or None; with ``tenant``, None
        unless the key is bound to that tenant (an all-tenant key is bound to none)."""

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


class WorkerPresence(Protocol):
    """One presence record per scheduler or executor process, for the Overview."""

    @abc.abstractmethod
    async def beat_worker(self, beat: WorkerBeat) -> None:
        """Store ``beat`` as its process's record, replacing the previous one of that id."""

    @abc.abstractmethod
    async def live_workers(self, now: datetime) -> list[WorkerBeat]:
        """The records whose ``expires_at`` is after ``now``, by role then id."""

    @abc.abstractmethod
    async def forget_worker(self, worker_id: str) -> None:
        """Delete the record with this id (a clean shutdown); no error if there is none."""

    @abc.abstractmethod
    async def prune_workers(self, now: datetime) -> int:
        """Delete the records expired at ``now``; returns how many."""


class Reporting(Protocol):
    """Filtered listing, counts and figures of the jobs (read only)."""

    @abc.abstractmethod
    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        """Up to ``limit`` jobs matching ``query``, in its sort order (by default newest
        ``created_at`` first, ties: newest id first), strictly after ``after``. One
        indexed query."""

    async def list_jobs(self, tenant_id: str, status: Status | None, limit: int) -> list[Job]:
        """A tenant's jobs (in ``status``, when given), newest first, at most ``limit``:
        :meth:`find_jobs` with only these conditions."""
        statuses = () if status is None else (status,)
        return await self.find_jobs(JobQuery(tenant_id=tenant_id, statuses=statuses), limit)

    @abc.abstractmethod
    async def count_jobs(
        self, tenant_id: str | None, statuses: Statuses = None, *, by_type: bool = False
    ) -> JobCounts:
        """How many of ``tenant_id``'s jobs (None: every tenant's) are in each of
        ``statuses`` (None: every status; zero included) and, with ``by_type``, in each
        (status, job type). The one count of each adapter: the stats, the Overview and the
        counts below are answered from it, and it from the counters
        (:meth:`Upkeep.job_counters`): it reads no job."""

    @abc.abstractmethod
    async def tenants(self, limit: int) -> list[str]:
        """The distinct tenant ids of the stored jobs, in ascending order, at most ``limit``
        (the first ones). Served by an index on the tenant: no scan of the jobs' documents."""

    async def count_by_status(self) -> dict[Status, int]:
        """How many jobs are in each status, every tenant's (for operators and benchmarks)."""
        return dict((await self.count_jobs(None)).by_status)

    async def count_unfinished(self, tenant_id: str) -> int:
        """How many of the tenant's jobs are unfinished (:data:`states.UNFINISHED
        <jobscheduler.domain.states.UNFINISHED>`: a pending cron template included)."""
        return (await self.count_jobs(tenant_id, UNFINISHED)).total

    @abc.abstractmethod
    async def stats(self, tenant_id: str | None, now: datetime) -> JobStats:
        """Counts by (status, job type), the oldest due one-off job, and the jobs completed /
        dead-lettered (by ``updated_at``) in each of the last
        :data:`~jobscheduler.store.query.STATS_WINDOWS` minutes. ``tenant_id`` None: every
        tenant."""

    @abc.abstractmethod
    async def overview_stats(self, tenant_id: str | None, now: datetime) -> OverviewStats:
        """Counts by status (every status, zero included), the oldest due one-off job, and
        per minute of the last :data:`~jobscheduler.domain.overview.SERIES_MINUTES` (the
        last one is ``now``'s) the jobs that ended completed / in dlq (by ``updated_at``).
        ``tenant_id`` None: every tenant. Indexed reads only: no scan of the jobs."""


class FlowControl(Protocol):
    """What the leader's fair, limited claim reads and writes (see
    :mod:`jobscheduler.roles.scheduler.flow`), and the limits and weights an admin sets.

    Every piece of flow state is in the store, so a new leader starts from it: the slots a
    job holds are fields of the job (unique: :meth:`claim_picks`), freed by the transition
    that ends or recovers its run (:data:`~jobscheduler.domain.states.SLOT_FIELDS`); a rate's
    state is one instant per bucket, written conditionally (:meth:`put_bucket`).
    """

    #: Whether :meth:`fair_candidates` is served from indexes (SQLite, memory): what
    #: ``FLOW_CONTROL=auto`` turns flow control on for. On MongoDB each fairness group is
    #: its own query (about a second each on FerretDB at a few thousand due jobs), so it is
    #: off there unless asked for.
    fair_claims_indexed: bool = True

    @abc.abstractmethod
    async def fair_candidates(
        self, now: datetime, per_group: int, exclude: Exclusions | None = None
    ) -> list[Candidate]:
        """Due one-off jobs (:data:`~jobscheduler.store.query.DUE_ONE_OFF` at ``now``) to
        claim fairly from: for each (priority, tenant, fairness key) group, its oldest
        ``per_group`` (by ``scheduled_at``, then id), highest priority levels first, until
        the levels read hold at least ``per_group`` jobs; none that ``exclude`` names
        (read only; any order)."""

    @abc.abstractmethod
    async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
        """Claim each picked job, as :meth:`Transitions.claim_due` claims one (it must still
        be due at ``now``: pending, no cron), writing ``states.claim_fields(now)`` and the
        slots the pick names. A slot is held by one job at most (a unique index): a pick
        whose slot another job holds is not claimed, nor is one that is no longer due. A
        pick's ``start_at`` is written as its ``queued_at`` (``claim_fields``). Each
        pick applies or not on its own; returns the jobs claimed, in ``picks`` order.
        A cancelled call may stop waiting for a claim under way (the reaper repairs it)."""

    @abc.abstractmethod
    async def queued_by_type(self, now: datetime) -> dict[str, int]:
        """How many jobs of each type are queued (claimed, not yet picked by an executor)
        for a start by ``now`` -- not those claimed ahead for a later start: what the leader
        keeps below the room ahead of each type's executors (read only; only the queued
        jobs are read)."""

    @abc.abstractmethod
    async def held_slots(self) -> list[str]:
        """Every slot some job holds (key and type slots), in no order (read only)."""

    @abc.abstractmethod
    async def buckets(self, scopes: Sequence[str]) -> dict[str, datetime]:
        """The stored instant (``tat``) of each of these rate buckets that exists."""

    @abc.abstractmethod
    async def put_bucket(self, scope: str, expect: datetime | None, tat: datetime) -> bool:
        """Set the bucket's instant to ``tat`` if it holds ``expect`` (None: if it does not
        exist yet); True if it did (one conditional write: exactly one of two leaders
        writing from the same read wins)."""

    @abc.abstractmethod
    async def limit_overrides(self, tenant_id: str | None = None) -> list[LimitOverride]:
        """Every override (of ``tenant_id``, when given), by tenant then job type."""

    @abc.abstractmethod
    async def put_limit_override(self, override: LimitOverride) -> None:
        """Store the override of its (tenant, job type), replacing any; empty limits
        delete it."""

    @abc.abstractmethod
    async def tenant_weights(self) -> list[TenantWeight]:
        """Every weight set, by tenant (a tenant not listed weighs 1)."""

    @abc.abstractmethod
    async def put_tenant_weight(self, weight: TenantWeight) -> None:
        """Store the tenant's weight, replacing any; a weight of 1 deletes it."""

    @abc.abstractmethod
    async def put_flow_report(self, report: FlowReport) -> None:
        """Store the leader's latest report of what it holds back (replacing the last)."""

    @abc.abstractmethod
    async def flow_report(self) -> FlowReport | None:
        """The latest report stored, or None."""


class JobStore(
    StoreLifecycle,
    JobRecords,
    Transitions,
    CronLedger,
    AttemptLog,
    Tenancy,
    WorkerPresence,
    Reporting,
    WorkflowRecords,
    FlowControl,
    Upkeep,
    Notifications,
    Protocol,
):
    """Every part of the store: what ``Deps`` holds and every adapter implements. Every
    state change is one atomic conditional update."""

    async def pass_reads(self, now: datetime) -> PassReads:
        """What a scheduler pass reads besides its claim: whether a template is due at
        ``now`` (:meth:`Transitions.due_templates`), whether one holds a buffered fire time
        (:meth:`CronLedger.buffered_templates`), and :meth:`Transitions.next_due_at`. The
        scheduler asks for the templates themselves only when one is, so a pass that
        finds none makes this one read. Here the three reads in turn; an adapter whose
        round trips cost more than its queries answers them in one."""
        return PassReads(
            templates_due=bool(await self.due_templates(now, 1)),
            buffers_held=bool(await self.buffered_templates(1)),
            next_due_at=await self.next_due_at(),
        )
