"""Recovering stuck jobs, the one path both the reaper's sweeps and ``dev``'s start-up take.

- :func:`requeue_stale`: ``queued`` jobs whose wake-up was lost go back to ``pending``
  (:func:`jobscheduler.domain.states.requeue`: the attempt count is kept).
- :func:`recover_lost`: ``claimed``/``running`` jobs whose executor stopped heartbeating are
  recovered (:func:`jobscheduler.domain.states.recover`: a failed attempt, or ``dlq`` once the
  attempts are used up, its dead letter published).
- :func:`recover_in_flight`: at start-up of a process that is the only executor of its store
  (``dev`` holding the lock on its SQLite file, :mod:`jobscheduler.process.devlock`), every
  ``claimed``/``running`` job belonged to a previous process that died (``kill -9``, a crash,
  a power cut): recover them all at once instead of after CLAIM_TIMEOUT.

Each recovery is conditional on exactly what was observed, so several reapers are safe; the
jobs are read and changed in batches of :data:`BATCH`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

import attrs

from jobscheduler.bus.dead_letters import publish_dead_letter
from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status, format_time
from jobscheduler.roles.deps import Deps

log = logging.getLogger(__name__)

BATCH = 500
#: The error type of a recovered attempt (its attempt record's, too).
LOST_ERROR_TYPE = "Lost"
#: The ``retry_at`` of a job that will not run again by itself (dead-lettered, cancelled).
NO_RETRY = "never"


@attrs.define
class Recovered:
    """How many jobs a recovery moved, and how many of those ended in ``dlq``."""

    jobs: int = 0
    dead_lettered: int = 0


async def requeue_stale(deps: Deps, *, queued_timeout: float) -> int:
    """Re-pend every job ``queued`` for longer than ``queued_timeout`` seconds; returns how
    many. Raises StoreError if the store fails."""
    requeued = 0
    while True:
        now = deps.clock.now()
        stale = await deps.store.find_stale(
            [Status.QUEUED], "queued_at", now - timedelta(seconds=queued_timeout), BATCH
        )
        for job in await deps.store.apply_many([states.requeue(job, now=now) for job in stale]):
            if job is not None:
                requeued += 1
                log.debug(
                    "re-pended job stuck in queued",
                    extra={"job_id": job.id, "tenant": job.tenant_id, "sweep": "queued"},
                )
        if len(stale) < BATCH:
            return requeued


async def recover_lost(
    deps: Deps,
    *,
    cutoff: Callable[[datetime], datetime],
    error: Callable[[Job], str | None] = lambda job: None,
    message: str = "recovered job whose executor stopped heartbeating",
    level: int = logging.DEBUG,
) -> Recovered:
    """Recover every ``claimed``/``running`` job whose heartbeat is older than
    ``cutoff(now)``, each with ``lastError`` ``error(job)`` (None: the standard "lost"
    message), logging each at ``level``. Raises StoreError if the store fails."""
    done = Recovered()
    while True:
        now = deps.clock.now()
        lost = await deps.store.find_stale(states.IN_FLIGHT, "heartbeat_at", cutoff(now), BATCH)
        changes = [states.recover(job, now=now, error=error(job)) for job in lost]
        for job in await deps.store.apply_many(changes):
            if job is None:
                continue
            done.jobs += 1
            # What was lost and when (or whether) the job runs again, as the executor's
            # retry and dead-letter lines say it.
            log.log(
                level,
                message,
                extra={
                    "job_id": job.id,
                    "tenant": job.tenant_id,
                    "sweep": "claimed",
                    "status": job.status.value,
                    "attempts": job.attempts,
                    "max_attempts": job.max_attempts,
                    "error_type": LOST_ERROR_TYPE,
                    "error_message": job.last_error,
                    "retry_at": format_time(job.scheduled_at)
                    if job.status is Status.PENDING
                    else NO_RETRY,
                },
            )
            if job.status is Status.DLQ:
                done.dead_lettered += 1
                await publish_dead_letter(deps.bus, job)
        if len(lost) < BATCH:
            return done


async def recover_in_flight(deps: Deps) -> int:
    """Recover every ``claimed``/``running`` job now; returns how many were recovered.

    Call it only while holding exclusive use of the store as its executor, and before this
    process's executor starts. Raises StoreError if the store fails.
    """
    done = await recover_lost(
        deps,
        # Every in-flight job, whatever its heartbeat: a cutoff in the future.
        cutoff=lambda now: now + timedelta(days=1),
        error=lambda job: (
            f"lost: the previous process ({job.claimed_by or '?'}) stopped while the "
            f"job was {job.status.value}; recovered at start-up"
        ),
        message="recovered job of a previous process",
        level=logging.WARNING,
    )
    if done.jobs:
        deps.metrics.reaper_recovered.labels(sweep="claimed").inc(done.jobs)
    return done.jobs
