"""The store's upkeep port: the job counters, pruning finished jobs, retention overrides,
and giving freed space back (the reaper's part of the store, and the counts' source).

**Counters.** Every adapter keeps, in the same write as each insert, transition and delete,
how many jobs each (tenant, status, job type) holds (:data:`~jobscheduler.store.query.CountKey`):
SQLite in the write's transaction (triggers on the jobs table), MongoDB as an ``$inc`` of a
counters document per (tenant, job type) sent in the same call right after the jobs' write
(no multi-document transactions: a call cut off between the two leaves a counter off, which
:meth:`Upkeep.reconcile_counts` repairs), the memory store in the same step. So
:meth:`~jobscheduler.store.base.Reporting.count_jobs`, the stats, the gauges, the quota and
the Overview read a handful of counters, whatever the number of jobs. The same writes keep
the counters of the jobs that ended lately (:mod:`jobscheduler.store.ends`), which the
throughput figures read.

**Pruning.** The reaper lists a (tenant, status, job type)'s expired jobs with
:meth:`Upkeep.expired_jobs` (an index on those columns and ``finished_at``), may archive
them, then deletes them with :meth:`Upkeep.delete_jobs`, which deletes only a job still as
it was read, so a job retried in between stays.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from jobscheduler.domain.model import Job
from jobscheduler.domain.retention import Override, PruneSummary

from .query import CountKey, Statuses


class Upkeep(Protocol):
    """Counters, pruning, retention overrides and space (see the module docstring)."""

    @abc.abstractmethod
    async def job_counters(self, statuses: Statuses = None) -> dict[CountKey, int]:
        """The counters of the jobs in ``statuses`` (None: every status), as kept by the
        writes: (tenant, status, job type) -> how many jobs. A key may be absent or zero
        when no job has it. Reads no job."""

    @abc.abstractmethod
    async def reconcile_counts(self) -> dict[CountKey, tuple[int, int]]:
        """Recount the jobs and set every counter that differs to the recount, unless a
        write moved it meanwhile (the next reconcile sees it again). Returns the counters it
        found wrong: key -> (counter, recount). Reads every job: for the reaper, now and
        then."""

    @abc.abstractmethod
    async def expired_jobs(self, key: CountKey, before: datetime, limit: int) -> list[Job]:
        """Up to ``limit`` jobs of ``key``'s tenant, status and job type that finished
        before ``before``, oldest ``finished_at`` first; never a cron template. One indexed
        range read (read only)."""

    @abc.abstractmethod
    async def delete_jobs(self, jobs: Sequence[Job]) -> int:
        """Delete each of ``jobs`` that still holds the status and ``finished_at`` it was
        read with, and its attempt records; the counters follow. Returns how many jobs
        were deleted. In slices the adapter sizes so that other writes wait for one slice
        at most."""

    async def prune_expired(self, key: CountKey, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` of what :meth:`expired_jobs` would return, oldest first,
        with their attempt records, without handing them out (when nothing archives them);
        returns how many. An adapter may delete fewer while more are expired (a job read
        expired that changed before its delete stays): the caller calls again until none
        is deleted. This default reads them and calls :meth:`delete_jobs`; an adapter
        may do it in statements that decode no row (SQLite does)."""
        return await self.delete_jobs(await self.expired_jobs(key, before, limit))

    @abc.abstractmethod
    async def set_retention(self, override: Override) -> None:
        """Store ``override`` in place of the one of its scope and name; an override that
        keeps nothing (``keep`` empty) deletes it."""

    @abc.abstractmethod
    async def retention_overrides(self) -> list[Override]:
        """Every override, by scope then name."""

    @abc.abstractmethod
    async def record_prune(self, summary: PruneSummary) -> None:
        """Keep ``summary`` as the last prune sweep (in place of the one before)."""

    @abc.abstractmethod
    async def last_prune(self) -> PruneSummary | None:
        """The last prune sweep recorded, or None."""

    @abc.abstractmethod
    async def forget_ends(self, before: datetime) -> int:
        """Delete the counters of ends (:mod:`jobscheduler.store.ends`) of the steps that
        began before ``before``; how many counters. For the reaper, now and then."""

    async def reclaim_space(self, max_pages: int) -> int:
        """Give up to ``max_pages`` pages freed by deletes back to the file system; how
        many (possibly fewer while more are free: the caller calls again until it gets 0).
        A store without such pages (the default) does nothing."""
        return 0


__all__ = ["Upkeep"]
