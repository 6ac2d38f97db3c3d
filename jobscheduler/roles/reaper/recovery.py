"""Start-up recovery for a process that is the only executor of its store (``dev``).

When ``dev`` holds the lock on its SQLite file (:mod:`jobscheduler.process.devlock`), no other
executor can be running the jobs that the store says are ``claimed`` or ``running``: they
belonged to a previous process that died (``kill -9``, a crash, a power cut). Instead of
waiting CLAIM_TIMEOUT for their heartbeats to go stale, recover them at once, exactly as the
reaper would (:func:`jobscheduler.domain.states.recover`: a failed attempt, or ``dlq`` once attempts
are used up), with a ``lastError`` that says what happened.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from jobscheduler.bus.dead_letters import publish_dead_letter
from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.roles.deps import Deps

log = logging.getLogger(__name__)

BATCH = 500


async def recover_in_flight(deps: Deps) -> int:
    """Recover every ``claimed``/``running`` job now; returns how many were recovered.

    Call it only while holding exclusive use of the store as its executor, and before this
    process's executor starts. Raises StoreError if the store fails.
    """
    recovered = 0
    while True:
        now = deps.clock.now()
        # Every in-flight job, whatever its heartbeat: ``before`` in the future.
        stuck = await deps.store.find_stale(
            [Status.CLAIMED, Status.RUNNING], "heartbeat_at", now + timedelta(days=1), BATCH
        )
        changes = [
            states.recover(
                job,
                now=now,
                error=(
                    f"lost: the previous process ({job.claimed_by or '?'}) stopped while the "
                    f"job was {job.status.value}; recovered at start-up"
                ),
            )
            for job in stuck
        ]
        for job in await deps.store.apply_many(changes):
            if job is None:
                continue
            recovered += 1
            log.warning(
                "recovered job of a previous process",
                extra={
                    "job_id": job.id,
                    "tenant": job.tenant_id,
                    "status": job.status.value,
                    "attempts": job.attempts,
                },
            )
            if job.status is Status.DLQ:
                await publish_dead_letter(deps.bus, job)
        if len(stuck) < BATCH:
            break
    if recovered:
        deps.metrics.reaper_recovered.labels(sweep="claimed").inc(recovered)
    return recovered
