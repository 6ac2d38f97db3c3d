"""Claims ahead of their starts (``RATE_AHEAD``), and what a leader that dies among them
leaves.

A rate that gives starts ahead is spent only once its jobs are claimed
(:func:`spend_ahead`), and their wake-ups go out only once it is. So a leader that dies
between the two leaves jobs queued for instants at or after the bucket's, with no wake-up
sent: none of them can start, and its successor gives those instants to others. The
successor also sends them back to pending (:class:`Stranded`), once a term per bucket, so
that they do not wait for the reaper (``QUEUED_TIMEOUT`` after their instants).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from datetime import datetime

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.flow import scope_parts
from jobscheduler.domain.model import Job, Status
from jobscheduler.store import JobStore
from jobscheduler.store.query import JobQuery

log = logging.getLogger(__name__)

#: Queued jobs of a rated type read at most, once a term, for claims ahead a dead leader
#: stranded (a stretch of its rate, and the room ahead of its executors).
STRANDED_READ = 10_000


@attrs.frozen
class Spent:
    """What :func:`spend_ahead` did: the claimed jobs to send, each bucket it wrote and
    the instant it now holds, and the buckets another leader had written meanwhile."""

    jobs: list[Job]
    written: dict[str, datetime]
    withdrawn: set[str]


async def spend_ahead(
    store: JobStore,
    now: datetime,
    claimed: list[Job],
    *,
    read: Mapping[str, datetime | None],
    after: Mapping[str, datetime | None],
    rates_of: Mapping[str, tuple[str, ...]],
) -> Spent:
    """Spend each rate bucket in ``after`` (read as ``read``) that a ``claimed`` job
    spends (``rates_of``); the claimed jobs of a bucket another leader wrote meanwhile go
    back to pending and are not sent. (A bucket none was claimed of stays as read.)"""
    used = {scope for job in claimed for scope in rates_of[job.id]}
    written: dict[str, datetime] = {}
    withdrawn: set[str] = set()
    for scope in sorted(used & after.keys()):
        tat = after[scope]
        assert tat is not None
        if await store.put_bucket(scope, read.get(scope), tat):
            written[scope] = tat
        else:
            withdrawn.add(scope)
    if not withdrawn:
        return Spent(jobs=claimed, written=written, withdrawn=withdrawn)
    back = [job for job in claimed if withdrawn.intersection(rates_of[job.id])]
    await store.apply_many([states.requeue(job, now=now) for job in back])
    for job in back:
        log.info(
            "claim ahead withdrawn: another leader spent its rate meanwhile",
            extra={"job_id": job.id, "tenant": job.tenant_id, "job_type": job.job_type},
        )
    kept = [job for job in claimed if not withdrawn.intersection(rates_of[job.id])]
    return Spent(jobs=kept, written=written, withdrawn=withdrawn)


class Stranded:
    """The jobs a dead leader claimed ahead and never sent (see the module doc)."""

    def __init__(self) -> None:
        #: Rate buckets this term has looked for stranded jobs of.
        self._swept: set[str] = set()

    def begin_term(self) -> None:
        """This scheduler leads again: look afresh."""
        self._swept.clear()

    async def find(self, store: JobStore, tats: Mapping[str, datetime | None]) -> Collection[Job]:
        """The stranded jobs of each bucket in ``tats`` (as read) not looked at this term:
        queued for an instant at or after the bucket's."""
        found: dict[str, Job] = {}
        for scope, tat in tats.items():
            if scope in self._swept:
                continue
            self._swept.add(scope)
            _, parts = scope_parts(scope)
            query = JobQuery(tenant_id=parts[0], statuses=(Status.QUEUED,), job_type=parts[1])
            for job in await store.find_jobs(query, STRANDED_READ):
                if (
                    job.queued_at is not None
                    # (No bucket: no job ever started at this rate.)
                    and (tat is None or job.queued_at >= tat)
                    and (len(parts) == 2 or job.concurrency_key == parts[2])
                ):
                    found[job.id] = job
        return found.values()

    @staticmethod
    async def repend(store: JobStore, now: datetime, jobs: Collection[Job]) -> None:
        """Send ``jobs`` (found by :meth:`find`) back to pending, each if still as found."""
        if not jobs:
            return
        for job in await store.apply_many([states.requeue(job, now=now) for job in jobs]):
            if job is not None:
                log.info(
                    "re-pended a job claimed ahead by a leader that died before sending it",
                    extra={"job_id": job.id, "tenant": job.tenant_id},
                )
