"""The reaper's prune of finished jobs, in bounded batches, and the counters' reconcile.

Each sweep walks the counters of the prunable statuses (so it never scans the jobs to find
what to prune): for each (tenant, status, job type) holding jobs, the retention that applies
(:class:`~jobscheduler.domain.retention.Rules`), then batches of at most PRUNE_BATCH expired
jobs, oldest first -- each archived first when ARCHIVE_DIR is set, then deleted -- with a
PRUNE_PAUSE between two, so that a prune of millions leaves the store's writer to creates
and claims most of the time. Freed space is then handed back in bounded steps. One summary
line per sweep that pruned anything; ``reaper_pruned_jobs_total{status}`` counts the jobs;
the store keeps the last sweep's summary for the Overview. Finished workflows go the same
way, each with its steps (:meth:`Pruner._prune_workflows`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

import trio

from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.retention import PRUNABLE, PruneSummary, Rules, expired_before
from jobscheduler.domain.workflows import WorkflowStatus
from jobscheduler.errors import StoreError
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.retention import current_rules
from jobscheduler.store.ends import KEPT as ENDS_KEPT
from jobscheduler.store.workflows import TenantScope

from .archive import Archive

log = logging.getLogger(__name__)

#: The job status whose retention a finished workflow of each outcome is kept by.
WORKFLOW_KEEP: dict[WorkflowStatus, Status] = {
    WorkflowStatus.COMPLETED: Status.COMPLETED,
    WorkflowStatus.FAILED: Status.DLQ,
    WorkflowStatus.CANCELLED: Status.CANCELLED,
}

#: Most free pages one step hands back (SQLite's pages are 4 KiB: 4 MiB; the store stops a
#: step sooner to leave its writer to others).
RECLAIM_PAGES = 1024
#: How often the counters are recounted and repaired (MongoDB's may drift after a cut-off
#: write; the others' cannot, which the recount confirms).
RECONCILE_INTERVAL = 3600.0


class Pruner:
    """Prunes by the current rules; archives first when an archive is given."""

    def __init__(self, deps: Deps, archive: Archive | None = None) -> None:
        self._deps = deps
        self._archive = archive

    async def sweep(self) -> PruneSummary:
        """One sweep over every (tenant, status, type) that holds finished jobs."""
        deps = self._deps
        settings = deps.settings
        started = time.monotonic()
        now = deps.clock.now()
        rules = await current_rules(deps)
        counters = await deps.store.job_counters(PRUNABLE)
        pruned: Counter[Status] = Counter()
        archived = 0
        for key in sorted(counters):
            tenant, status, job_type = key
            keep = rules.keep_for(tenant, job_type, status)
            before = None if keep is None else expired_before(now, keep)
            if before is None:
                continue
            while True:
                if self._archive is None:
                    # Fewer than a batch is no sign of the end (the store may stop early
                    # to leave its writer to others): the end is a call that deletes none.
                    deleted = await deps.store.prune_expired(key, before, settings.prune_batch)
                    more = deleted > 0
                else:
                    batch = await deps.store.expired_jobs(key, before, settings.prune_batch)
                    if batch:
                        await self._archive_jobs(self._archive, batch)
                        archived += len(batch)
                    deleted = await deps.store.delete_jobs(batch) if batch else 0
                    more = len(batch) == settings.prune_batch
                pruned[status] += deleted
                deps.metrics.reaper_pruned.labels(status=status.value).inc(deleted)
                if not more:
                    break
                await trio.sleep(settings.prune_pause)
        workflows = await self._prune_workflows(rules, now)
        pruned = +pruned  # the statuses that lost jobs only
        if pruned or workflows:
            await self._reclaim()
        summary = PruneSummary(
            at=now, took=time.monotonic() - started, pruned=dict(pruned), archived=archived
        )
        if pruned or workflows:
            log.info(
                "reaper pruned finished jobs",
                extra={
                    **{status.value: n for status, n in pruned.items()},
                    "workflows": workflows,
                    "archived": archived,
                    "took": round(summary.took, 3),
                },
            )
            await deps.store.record_prune(summary)
        return summary

    async def _archive_jobs(self, archive: Archive, jobs: Sequence[Job]) -> None:
        """Write ``jobs`` with their attempt records to the archive (before their delete)."""
        records = await self._deps.store.attempts_of([job.id for job in jobs])
        await archive.write(jobs, records)

    async def _prune_workflows(self, rules: Rules, now: datetime) -> int:
        """Delete the finished workflows past the retention of their outcome in their
        tenant (see :data:`WORKFLOW_KEEP`; a tenant's own retention of that status wins,
        the job types' do not apply: a workflow's steps are of many types), each with its
        steps and their attempt records; how many. The steps are archived first when there
        is an archive; then the record is deleted (so nothing can retry the workflow any
        more), then its steps."""
        deps = self._deps
        batch = deps.settings.prune_batch
        deleted = 0
        for status, like in WORKFLOW_KEEP.items():
            own = {t: keep[like] for t, keep in rules.by_tenant.items() if like in keep}
            scopes = [(TenantScope(skip_tenants=tuple(own)), rules.defaults.get(like))]
            scopes += [(TenantScope(tenant=tenant), keep) for tenant, keep in own.items()]
            for scope, keep in scopes:
                before = None if keep is None else expired_before(now, keep)
                if before is None:
                    continue
                while True:
                    found = await deps.store.expired_workflows(status, before, batch, scope)
                    for workflow in found:
                        steps = await deps.store.workflow_steps(workflow.id)
                        if self._archive is not None and steps:
                            await self._archive_jobs(self._archive, steps)
                        if await deps.store.delete_workflow_record(workflow):
                            await deps.store.delete_jobs(steps)
                            deleted += 1
                            deps.metrics.reaper_pruned_workflows.labels(status=status.value).inc()
                    if len(found) < batch:
                        break
                    await trio.sleep(deps.settings.prune_pause)
        return deleted

    async def _reclaim(self) -> None:
        """Hand the pages the deletes freed back to the file system, a step at a time."""
        while True:
            if not await self._deps.store.reclaim_space(RECLAIM_PAGES):
                return
            await trio.sleep(self._deps.settings.prune_pause)


async def run_pruner(
    deps: Deps, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Prune every REAPER_INTERVAL (after the previous sweep ended), then forget the
    counters of ends past their use, and reconcile the counters every RECONCILE_INTERVAL,
    until cancelled. A store failure is logged and the
    next sweep tries again; an archive that cannot be written stops the sweep (nothing is
    deleted unarchived)."""
    archive = Archive(deps.settings.archive_dir) if deps.settings.archive_dir else None
    pruner = Pruner(deps, archive)
    task_status.started()
    reconciled_at = trio.current_time()
    while True:
        try:
            await pruner.sweep()
        except StoreError as exc:
            log.warning("finished jobs not pruned", extra={"error": str(exc)})
        except OSError as exc:
            log.error("finished jobs not pruned: the archive cannot be written", exc_info=exc)
        if trio.current_time() - reconciled_at >= RECONCILE_INTERVAL:
            reconciled_at = trio.current_time()
            try:
                await deps.store.reconcile_counts()
            except StoreError as exc:
                log.warning("job counters not reconciled", extra={"error": str(exc)})
        try:
            await deps.store.forget_ends(deps.clock.now() - ENDS_KEPT)
        except StoreError as exc:
            log.warning("counters of ended jobs not forgotten", extra={"error": str(exc)})
        await trio.sleep(deps.settings.reaper_interval)


__all__ = ["RECLAIM_PAGES", "Pruner", "run_pruner"]
