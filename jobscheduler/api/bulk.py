"""What a user can do to every job a filter matches: cancel or retry them, in bounded pages.

Bulk actions walk every match of a filter in keyset pages of :data:`BULK_BATCH` jobs: one
read and one batched write per page (the actions on one job are :mod:`.actions`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.workflows import actions as workflow_actions
from jobscheduler.store.query import Cursor, JobQuery

from .actions import Caller, direct, next_fire

log = logging.getLogger(__name__)

#: Jobs read and changed per round trip by a bulk action.
BULK_BATCH = 500


@attrs.frozen(kw_only=True)
class BulkResult:
    matched: int
    changed: int
    #: Running jobs asked to stop (bulk cancel only; counted in ``changed`` too).
    cancel_requested: int = 0


async def _walk(
    deps: Deps,
    query: JobQuery,
    build: Callable[[Job], states.Change | None],
    call: Caller,
    dry_run: bool,
    *,
    action: str,
) -> BulkResult:
    """Every job matching ``query``, BULK_BATCH at a time: ``build(job)`` gives the change
    for it (or None), and each page's changes go in one ``apply_bulk`` (a ``dry_run`` only
    counts the matches: nothing is written). The ``action`` is logged with its counts."""
    matched = changed = requested = 0
    after: Cursor | None = None
    while True:
        page = await call(deps.store.find_jobs, query, BULK_BATCH, after)
        if not page:
            break
        after = Cursor.after(page[-1], query.sort)
        changes = [c for c in (build(job) for job in page) if c is not None]
        matched += len(page)
        if changes and not dry_run:
            changed += await call(deps.store.apply_bulk, changes)
            requested += sum(c.transition == "request_cancel" for c in changes)
        if len(page) < BULK_BATCH:
            break
    log.info(
        action,
        extra={
            "tenant": query.tenant_id,
            "matched": matched,
            "changed": changed,
            "dry_run": dry_run,
        },
    )
    return BulkResult(matched=matched, changed=changed, cancel_requested=requested)


async def bulk_cancel(
    deps: Deps, query: JobQuery, *, call: Caller = direct, dry_run: bool = False
) -> BulkResult:
    """Cancel every match not yet finished (running ones get a cancel request); cron
    templates only with ``cron=True`` in the filter. Safe to repeat: jobs already cancelled
    or asked to stop are left alone."""
    cancellable = (*states.CANCELLABLE, Status.RUNNING)
    if query.cron is None:
        # Templates are retired only when the filter asks for them (``cron: true``).
        query = attrs.evolve(query, cron=False)
    statuses = tuple(s for s in (query.statuses or cancellable) if s in cancellable)
    if not statuses:
        return BulkResult(matched=0, changed=0)
    now = deps.clock.now()

    def build(job: Job) -> states.Change | None:
        if job.status is Status.RUNNING:
            if job.cancel_requested_at is not None:
                return None
            return states.request_cancel(job, now=now)
        return states.cancel(job, now=now)

    query = attrs.evolve(query, statuses=statuses)
    return await _walk(deps, query, build, call, dry_run, action="bulk cancel")


async def bulk_retry(
    deps: Deps,
    query: JobQuery,
    *,
    scheduled_at: datetime | None = None,
    call: Caller = direct,
    dry_run: bool = False,
) -> BulkResult:
    """Retry every dlq/cancelled match (due ``scheduled_at``, default now; a template at its
    next fire; a workflow step waits for its parents again, its workflow resumed). Safe to
    repeat: retried jobs are pending (or waiting) and no longer match."""
    statuses = tuple(s for s in (query.statuses or states.RETRYABLE) if s in states.RETRYABLE)
    if not statuses:
        return BulkResult(matched=0, changed=0)
    now = deps.clock.now()
    steps: list[Job] = []

    def build(job: Job) -> states.Change:
        if job.workflow_id is not None:  # waits for its parents again (then resumed)
            steps.append(job)
            return states.retry_step(job, now=now, scheduled_at=scheduled_at)
        due = next_fire(job, now) if job.cron is not None else scheduled_at
        return states.retry(job, now=now, scheduled_at=due)

    query = attrs.evolve(query, statuses=statuses)
    result = await _walk(deps, query, build, call, dry_run, action="bulk retry")
    if steps and not dry_run:
        await call(workflow_actions.resume_workflows, deps, steps, by="api")
    if result.changed and deps.waker is not None:
        deps.waker.notify(scheduled_at or now)
    return result


__all__ = ["BULK_BATCH", "BulkResult", "bulk_cancel", "bulk_retry"]
