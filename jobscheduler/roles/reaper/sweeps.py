"""The reaper role: return stuck jobs to pending, sample the job gauges, and prune finished
jobs (:mod:`.pruning`, in a task of its own).

Two sweeps of jobs (:mod:`.recovery`, the path ``dev``'s start-up recovery takes too): ``queued``
longer than QUEUED_TIMEOUT (the wake-up was lost; attempt count kept) and
``claimed``/``running`` without a heartbeat for CLAIM_TIMEOUT (the executor died; counts as
a failed attempt, so a job that kills its executor ends in dlq). Each job recovered is
logged at debug; each sweep that recovered any logs one summary line. Then the workflows'
sweeps (:mod:`jobscheduler.roles.workflows.sweep`): steps no one settled, creates that
never finished.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import trio

from jobscheduler.errors import StoreError
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.retention import prune_older_than
from jobscheduler.roles.workflows.sweep import SETTLE_GRACE, finish_creates, settle_marked

from .pruning import run_pruner
from .recovery import BATCH, recover_lost, requeue_stale

log = logging.getLogger(__name__)

#: Upper bound of one sample of the job gauges (read from the counters, plus the stats'
#: windows).
STATS_TIMEOUT = 5.0


class Reaper:
    def __init__(self, deps: Deps) -> None:
        self._deps = deps

    async def sweep(
        self, *, queued_timeout: float | None = None, settle_grace: float = SETTLE_GRACE
    ) -> dict[str, int]:
        """Run both sweeps once, then the workflows' (:meth:`sweep_workflows`); returns how
        many jobs each of the first two recovered.

        ``queued_timeout`` overrides QUEUED_TIMEOUT (0 re-pends every queued job);
        ``settle_grace`` is how long a step's mark is left to its writer.
        """
        deps = self._deps
        settings = deps.settings
        if queued_timeout is None:
            queued_timeout = settings.queued_timeout
        requeued = await requeue_stale(deps, queued_timeout=queued_timeout)
        lost = await recover_lost(
            deps, cutoff=lambda now: now - timedelta(seconds=settings.claim_timeout)
        )
        recovered = {"queued": requeued, "claimed": lost.jobs}
        await self.sweep_workflows(settle_grace=settle_grace)
        await prune_older_than(
            deps, settings.attempt_retention, deps.store.prune_attempts, "attempt records"
        )
        await prune_older_than(
            deps,
            settings.cron_ledger_retention,
            deps.store.prune_occurrences,
            "cron ledger records",
        )
        for sweep, count in recovered.items():
            if count:
                deps.metrics.reaper_recovered.labels(sweep=sweep).inc(count)
        if any(recovered.values()):
            # One line per sweep; the jobs themselves are logged at debug.
            log.warning(
                "reaper recovered jobs",
                extra={
                    "requeued": recovered["queued"],
                    "recovered": recovered["claimed"],
                    "dead_lettered": lost.dead_lettered,
                },
            )
        if any(recovered.values()) and deps.waker is not None:
            deps.waker.notify(deps.clock.now())
        return recovered

    async def sweep_workflows(self, *, settle_grace: float = SETTLE_GRACE) -> None:
        """Settle the workflow steps no one settled (marked longer than ``settle_grace``
        ago: a step whose parents are done is released even if whoever ended them died),
        and open or give up the creates that never finished. A failure is logged: the next
        sweep tries again."""
        try:
            await finish_creates(self._deps)
            await settle_marked(self._deps, grace=settle_grace)
        except StoreError as exc:
            log.warning("workflow sweep failed", extra={"error": str(exc)})

    async def prune_audit(self) -> int:
        """Delete audit records older than AUDIT_RETENTION; returns how many."""
        deps = self._deps
        before = deps.clock.now() - timedelta(seconds=deps.settings.audit_retention)
        pruned = 0
        while True:
            batch = await deps.store.prune_audit(before, BATCH)
            pruned += batch
            if batch < BATCH:
                break
        if pruned:
            log.info("pruned old audit records", extra={"records": pruned})
        return pruned


async def sample_gauges(deps: Deps, seen: set[tuple[str, str]]) -> bool:
    """Set the ``jobs{status,job_type}`` and queue-lag gauges from one stats query, bounded
    by STATS_TIMEOUT; a label pair seen before but gone now reads 0. False if it failed."""
    now = deps.clock.now()
    with trio.move_on_after(STATS_TIMEOUT):
        try:
            stats = await deps.store.stats(None, now)
        except StoreError as exc:
            log.warning("job gauges not sampled", extra={"error": str(exc)})
            return False
        current = {(status.value, job_type): n for (status, job_type), n in stats.counts.items()}
        for labels in seen - set(current):
            deps.metrics.jobs.labels(*labels).set(0)
        for labels, n in current.items():
            deps.metrics.jobs.labels(*labels).set(n)
        seen |= set(current)
        deps.metrics.queue_lag.set(stats.queue_lag(now))
        return True
    log.warning("job gauges not sampled: stats query timed out", extra={"timeout": STATS_TIMEOUT})
    return False


async def run_reaper(
    deps: Deps, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """The reaper role: sweep every REAPER_INTERVAL until cancelled."""
    reaper = Reaper(deps)
    if not deps.bus.durable:
        # A bus that forgets wake-ups on restart (the in-process one): every job queued
        # before this start lost its wake-up. Re-pend them now, before reporting started (so
        # before this process's scheduler queues anything), not after QUEUED_TIMEOUT.
        try:
            await reaper.sweep(queued_timeout=0.0, settle_grace=0.0)
        except StoreError as exc:
            log.error("reaper start-up sweep failed", extra={"error": str(exc)})
    async with trio.open_nursery() as nursery:
        # Pruning runs beside the sweeps: a prune of millions never delays a recovery.
        await nursery.start(run_pruner, deps)
        task_status.started()
        await _sweep_forever(reaper, deps)


async def _sweep_forever(reaper: Reaper, deps: Deps) -> None:
    seen: set[tuple[str, str]] = set()
    while True:
        try:
            await reaper.sweep()
        except StoreError as exc:
            log.error("reaper sweep failed", extra={"error": str(exc)})
        try:
            await reaper.prune_audit()
        except StoreError as exc:
            log.warning("audit records not pruned", extra={"error": str(exc)})
        await sample_gauges(deps, seen)
        await trio.sleep(deps.settings.reaper_interval)
