"""What the store is asked about jobs: the predicates every adapter compiles, job filters,
keyset cursors and stats.

A :class:`JobQuery` is a conjunction of optional conditions. It is the one definition of
each predicate the store evaluates: the management routes' filters, and the named ones
below (:data:`DUE_ONE_OFF`, :data:`DUE_TEMPLATE`, :data:`PENDING`, :data:`BUFFERED`). Each
adapter compiles it one way -- SQLite to the WHERE text its partial indexes are built from
(``store/sqlite/where.py``), MongoDB to a filter document (``store/mongo/codec.py``), the
memory store to :meth:`JobQuery.matches` -- so no adapter spells a predicate out again. The
status sets come from :mod:`jobscheduler.domain.states`.

Pages are in the query's :class:`Sort` order (by default newest first: ``created_at`` desc,
then ``id`` desc) and a :class:`Cursor` is the position of the last job of a page, so the
next page starts strictly after it: pages stay stable while jobs change status
(``created_at`` never does; ``scheduled_at`` does when a job is retried or rescheduled, so a
page walk by due time may miss or repeat such a job).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple, Protocol, TypeVar

import attrs

from jobscheduler.domain.model import Job, Status, utc

#: The windows of ``GET /stats`` completions and failures, in minutes.
STATS_WINDOWS: tuple[int, ...] = (1, 5, 15)


class Sort(enum.Enum):
    """The order of a listing: a time field, then the id, both in the same direction."""

    CREATED_DESC = "-createdAt"
    CREATED_ASC = "createdAt"
    SCHEDULED_DESC = "-scheduledAt"
    SCHEDULED_ASC = "scheduledAt"

    @property
    def field(self) -> str:
        """The Job attribute it orders by."""
        return "scheduled_at" if self in (Sort.SCHEDULED_DESC, Sort.SCHEDULED_ASC) else "created_at"

    @property
    def descending(self) -> bool:
        return self.value.startswith("-")

    def key(self, job: Job) -> datetime:
        """The job's value of the sort field."""
        value: datetime = getattr(job, self.field)
        return value


#: Most ids one query may name (a page's selection, a dead-letter group).
MAX_QUERY_IDS = 1000


@attrs.frozen(kw_only=True)
class JobQuery:
    """Jobs matching every given condition (None / empty: no condition)."""

    #: None: every tenant (an all-tenant admin only).
    tenant_id: str | None
    statuses: tuple[Status, ...] = ()
    job_type: str | None = None
    template_id: str | None = None
    #: True: cron templates only; False: everything but templates.
    cron: bool | None = None
    #: ``created_at >= created_after`` and ``created_at < created_before``.
    created_after: datetime | None = None
    created_before: datetime | None = None
    #: ``finished_at < finished_before``: finished before then (unfinished jobs never match).
    finished_before: datetime | None = None
    #: Exactly this idempotency key / keys starting with this text (the (tenant, key) index).
    idempotency_key: str | None = None
    key_prefix: str | None = None
    #: Only these job ids (empty: no condition).
    ids: tuple[str, ...] = ()
    #: ``scheduled_at <= due_by``: due by then (None: no condition).
    due_by: datetime | None = None
    #: True: holding a buffered fire time (``cron_buffered`` set); False: holding none.
    buffered: bool | None = None
    #: The steps of this workflow / the steps this step spawned.
    workflow_id: str | None = None
    spawned_by: str | None = None
    #: True: steps marked for their workflow to act on (``step_dirty``).
    step_dirty: bool | None = None
    sort: Sort = Sort.CREATED_DESC

    def matches(self, job: Job) -> bool:
        """The same conditions in Python (the memory store, and tests)."""
        return (
            (self.tenant_id is None or job.tenant_id == self.tenant_id)
            and (not self.statuses or job.status in self.statuses)
            and (self.job_type is None or job.job_type == self.job_type)
            and (self.template_id is None or job.template_id == self.template_id)
            and (self.cron is None or (job.cron is not None) == self.cron)
            and (self.created_after is None or job.created_at >= self.created_after)
            and (self.created_before is None or job.created_at < self.created_before)
            and (
                self.finished_before is None
                or (job.finished_at is not None and job.finished_at < self.finished_before)
            )
            and (self.idempotency_key is None or job.idempotency_key == self.idempotency_key)
            and (self.key_prefix is None or job.idempotency_key.startswith(self.key_prefix))
            and (not self.ids or job.id in self.ids)
            and (self.due_by is None or job.scheduled_at <= self.due_by)
            and (self.buffered is None or (job.cron_buffered is not None) == self.buffered)
            and (self.workflow_id is None or job.workflow_id == self.workflow_id)
            and (self.spawned_by is None or job.spawned_by == self.spawned_by)
            and (self.step_dirty is None or job.step_dirty == self.step_dirty)
        )

    def due(self, now: datetime) -> JobQuery:
        """This query, of the jobs due by ``now`` (``scheduled_at <= now``)."""
        return attrs.evolve(self, due_by=utc(now))

    def of_tenant(self, tenant_id: str | None) -> JobQuery:
        """This query, of ``tenant_id``'s jobs (None: every tenant's)."""
        return attrs.evolve(self, tenant_id=tenant_id)


#: Every pending job, one-off or cron template: what the scheduler's next wake-up is
#: computed from (:meth:`~jobscheduler.store.base.Transitions.next_due_at`).
PENDING = JobQuery(tenant_id=None, statuses=(Status.PENDING,))
#: A one-off job the scheduler claims once due (``DUE_ONE_OFF.due(now)``): pending, no cron.
#: The queue lag of ``GET /stats`` and the Overview is the oldest of them.
DUE_ONE_OFF = JobQuery(tenant_id=None, statuses=(Status.PENDING,), cron=False)
#: A cron template the scheduler fires once due (``DUE_TEMPLATE.due(now)``): pending, with
#: a cron expression (a paused template is not pending).
DUE_TEMPLATE = JobQuery(tenant_id=None, statuses=(Status.PENDING,), cron=True)
#: A pending template holding a buffered fire time (``overlap="buffer_one"``).
BUFFERED = JobQuery(tenant_id=None, statuses=(Status.PENDING,), buffered=True)
#: The ends the throughput figures count (``GET /stats``'s windows, the Overview's series):
#: completed (succeeded) and dlq (failed for good). A cancelled job is neither.
THROUGHPUT: tuple[Status, ...] = (Status.COMPLETED, Status.DLQ)


@attrs.frozen(kw_only=True)
class Pick:
    """A job the leader's fair claim chose, with the slots it takes (None: no such limit)
    and, for a job claimed ahead of its start under a rate limit, that start instant
    (whole milliseconds; None: now)."""

    job_id: str
    key_slot: str | None = None
    type_slot: str | None = None
    start_at: datetime | None = None

    @property
    def alone(self) -> bool:
        """Written by a statement of its own (a slot, or a start instant, of its own)."""
        return self.key_slot is not None or self.type_slot is not None or self.start_at is not None


class Candidate(NamedTuple):
    """A due job as a fair claim reads it: what its order and the limits look at, not the
    whole job (no payload, result or history is read or decoded for a job left unpicked)."""

    id: str
    priority: int
    tenant_id: str
    fairness_key: str
    job_type: str
    concurrency_key: str | None
    scheduled_at: datetime

    @classmethod
    def of(cls, job: Job) -> Candidate:
        return cls(
            job.id,
            job.priority,
            job.tenant_id,
            job.fairness_key,
            job.job_type,
            job.concurrency_key,
            job.scheduled_at,
        )


@attrs.frozen(kw_only=True)
class Exclusions:
    """Due jobs a fair claim does not read: their tenant's type, or key of a type, is held
    back as a whole (its slots taken, its rate spent)."""

    #: (tenant, job type)
    types: frozenset[tuple[str, str]] = frozenset()
    #: (tenant, job type, concurrency key)
    keys: frozenset[tuple[str, str, str]] = frozenset()
    #: A store that steps over the jobs of the keys left out (it cannot seek past them) may
    #: stop after this many of a type's oldest due jobs in a group: the others of that type
    #: are read by a claim without this bound (None: read them all).
    walk: int | None = None

    def of_tenant(self, tenant_id: str) -> tuple[list[str], list[tuple[str, str]]]:
        """The excluded types, and (type, key) pairs, of one tenant (sorted)."""
        types = sorted({t for tenant, t in self.types if tenant == tenant_id})
        keys = sorted((t, k) for tenant, t, k in self.keys if tenant == tenant_id)
        return types, keys

    def excludes(self, job: Job) -> bool:
        """The same in Python (the memory store, and tests)."""
        if (job.tenant_id, job.job_type) in self.types:
            return True
        key = job.concurrency_key
        return key is not None and (job.tenant_id, job.job_type, key) in self.keys


#: How a fair claim's candidates are grouped: (priority, tenant, fairness key).
def fair_group(job: Job) -> tuple[int, str, str]:
    return (job.priority, job.tenant_id, job.fairness_key)


@attrs.frozen(kw_only=True)
class PassReads:
    """What a scheduler pass reads besides its claim (:meth:`~jobscheduler.store.base.
    JobStore.pass_reads`): whether any template is due, whether any holds a buffered fire
    time, and the earliest due time of the pending jobs."""

    templates_due: bool
    buffers_held: bool
    next_due_at: datetime | None


@attrs.frozen(kw_only=True)
class Cursor:
    """The position of a job in a listing's order: a page continues after it.

    ``at`` is the job's value of the sort field (``created_at`` in the default order).
    """

    at: datetime
    id: str
    sort: Sort = Sort.CREATED_DESC

    @classmethod
    def after(cls, job: Job, sort: Sort = Sort.CREATED_DESC) -> Cursor:
        return cls(at=sort.key(job), id=job.id, sort=sort)


class Listed(Protocol):
    """A record of a listing: it has an id, and the time field of the listing's :class:`Sort`."""

    @property
    def id(self) -> str: ...


L = TypeVar("L", bound=Listed)


def keyset_page(found: Sequence[L], sort: Sort, limit: int, after: Cursor | None) -> list[L]:
    """The first ``limit`` of ``found`` in ``sort``'s order (its time field, then the id),
    strictly after ``after`` when given: a page in Python (the memory store), as the other
    adapters' queries select it."""

    def key(record: L) -> tuple[datetime, str]:
        at: datetime = getattr(record, sort.field)
        return at, record.id

    if after is not None:
        mark = (utc(after.at), after.id)
        if sort.descending:
            found = [record for record in found if key(record) < mark]
        else:
            found = [record for record in found if key(record) > mark]
    return sorted(found, key=key, reverse=sort.descending)[:limit]


@attrs.frozen(kw_only=True)
class Window:
    """Jobs that finished in the last ``minutes``."""

    minutes: int
    completed: int
    failed: int


def stats_windows(ended: Callable[[int, Status], int]) -> tuple[Window, ...]:
    """The windows of :data:`STATS_WINDOWS`, from ``ended(minutes, status)``: how many jobs
    reached ``status``, an end of :data:`THROUGHPUT`, in the last ``minutes``."""
    return tuple(
        Window(
            minutes=minutes,
            completed=ended(minutes, Status.COMPLETED),
            failed=ended(minutes, Status.DLQ),
        )
        for minutes in STATS_WINDOWS
    )


#: The statuses a count is of (None: every status).
Statuses = Sequence[Status] | None

#: What the store keeps a counter of: (tenant, status, job type).
CountKey = tuple[str, Status, str]


def counts_from(
    counters: Mapping[CountKey, int], tenant_id: str | None, statuses: Statuses, by_type: bool
) -> JobCounts:
    """The :class:`JobCounts` of ``tenant_id`` (None: every tenant) in ``statuses`` (None:
    every status), added up from the counters: how every adapter answers its count."""
    wanted = None if statuses is None else {Status(s) for s in statuses}
    found: Counter[tuple[Status, str]] = Counter()
    for (tenant, status, job_type), n in counters.items():
        mine = tenant_id is None or tenant == tenant_id
        if n and mine and (wanted is None or status in wanted):
            found[(status, job_type)] += n
    if by_type:
        return JobCounts.of_types(statuses, found)
    by_status: Counter[Status] = Counter()
    for (status, _), n in found.items():
        by_status[status] += n
    return JobCounts.of_statuses(statuses, by_status)


@attrs.frozen(kw_only=True)
class JobCounts:
    """How many jobs one count found: in each status it counted (zero included), and, when
    it counted by type, in each (status, job type) it found."""

    by_status: Mapping[Status, int]
    #: (status, job type) -> how many jobs; None when not counted by type.
    by_type: Mapping[tuple[Status, str], int] | None = None

    @classmethod
    def of_statuses(cls, statuses: Statuses, found: Mapping[Status, int]) -> JobCounts:
        """Counts by status: ``found``, with zero for each status counted but not found
        (``statuses`` None: every status)."""
        counted = Status if statuses is None else statuses
        return cls(by_status={Status(s): int(found.get(Status(s), 0)) for s in counted})

    @classmethod
    def of_types(cls, statuses: Statuses, found: Mapping[tuple[Status, str], int]) -> JobCounts:
        """Counts by (status, job type) as ``found``, and by status their sums."""
        totals: Counter[Status] = Counter()
        for (status, _), n in found.items():
            totals[status] += n
        return attrs.evolve(cls.of_statuses(statuses, totals), by_type=dict(found))

    @property
    def total(self) -> int:
        """How many jobs were counted, in every status counted."""
        return sum(self.by_status.values())


@attrs.frozen(kw_only=True)
class JobStats:
    """What ``GET /stats`` reports (and the reaper exports as gauges)."""

    #: (status, job type) -> how many jobs.
    counts: Mapping[tuple[Status, str], int]
    #: ``scheduled_at`` of the oldest due pending one-off job (None: nothing is waiting).
    oldest_due_at: datetime | None
    windows: tuple[Window, ...]

    def queue_lag(self, now: datetime) -> float:
        """Seconds the oldest due pending job has waited past its ``scheduledAt``."""
        if self.oldest_due_at is None:
            return 0.0
        return max((now - self.oldest_due_at) / timedelta(seconds=1), 0.0)


__all__ = [
    "BUFFERED",
    "DUE_ONE_OFF",
    "DUE_TEMPLATE",
    "MAX_QUERY_IDS",
    "PENDING",
    "STATS_WINDOWS",
    "THROUGHPUT",
    "Candidate",
    "CountKey",
    "Cursor",
    "Exclusions",
    "JobCounts",
    "JobQuery",
    "JobStats",
    "Listed",
    "Pick",
    "Sort",
    "Statuses",
    "Window",
    "counts_from",
    "fair_group",
    "keyset_page",
    "stats_windows",
]
