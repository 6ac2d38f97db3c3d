"""What a user does to a workflow: cancel it, or retry its failed steps (resume it).

- **Cancel**: the record gets a cancel request first (no step is released after it: a
  settler that reads it cancels what waits), then every unfinished step is cancelled (a
  running one gets a cancel request its executor honours), in passes until none is left
  un-asked; the settle that follows finishes the workflow once nothing runs.
- **Retry** (of the workflow, or of one step): the record is reopened first (a new version,
  so a finish decided on an older read does not apply), then the step -- or every step in
  dlq or cancelled -- waits again (``retry_step``: attempts reset, a replay kept), with
  every cancelled step downstream of it; a settle releases those whose parents have
  completed. What completed is never run again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.workflows import Workflow, WorkflowStatus
from jobscheduler.errors import InvalidTransition, StoreError
from jobscheduler.roles.deps import Deps

from .settle import Settler

log = logging.getLogger(__name__)

#: Passes (each a fresh read) a cancel or a retry makes before giving up on a moving target.
PASSES = 5
_RETRYABLE = (Status.DLQ, Status.CANCELLED)


def _conflict(workflow: Workflow, message: str) -> InvalidTransition:
    return InvalidTransition(
        f"workflow {workflow.id} is {workflow.status.value}: {message}",
        job_id=workflow.id,
        status=workflow.status.value,
    )


async def cancel_workflow(deps: Deps, workflow: Workflow, *, by: str) -> Workflow:
    """Cancel every unfinished step (see the module docstring); the record after it. A
    cancelled workflow: a no-op; a completed or failed one: 409."""
    store = deps.store
    for _ in range(PASSES):
        if workflow.status is WorkflowStatus.CANCELLED or workflow.cancel_requested_at:
            break
        if workflow.status is not WorkflowStatus.RUNNING:
            raise _conflict(workflow, "a finished workflow cannot be cancelled")
        change = states.request_workflow_cancel(workflow, now=deps.clock.now())
        if (after := await store.apply_workflow(change)) is not None:
            workflow = after
            break
        workflow = await store.get_workflow(workflow.id)
    else:
        raise StoreError(f"workflow {workflow.id} kept changing; cancel not applied, retry")
    ended: list[Job] = []
    for _ in range(PASSES):
        now = deps.clock.now()
        changes = []
        for job in await store.workflow_steps(workflow.id):
            if job.status in states.CANCELLABLE:
                changes.append(states.cancel(job, now=now))
            elif job.status is Status.RUNNING and job.cancel_requested_at is None:
                changes.append(states.request_cancel(job, now=now))
        if not changes:
            break
        results = await store.apply_many(changes)
        ended += [j for j in results if j is not None and j.status is Status.CANCELLED]
        if all(j is not None for j in results):
            break
    log.info(
        "workflow cancelled",
        extra={"workflow_id": workflow.id, "tenant": workflow.tenant_id, "steps": len(ended)},
    )
    await Settler(deps, by=by).settle(ended)
    return await store.get_workflow(workflow.id)


async def retry_workflow(
    deps: Deps,
    workflow: Workflow,
    *,
    step_id: str | None = None,
    by: str,
    payload: Mapping[str, Any] | None = None,
    scheduled_at: datetime | None = None,
) -> Workflow:
    """Retry the step ``step_id`` (dlq or cancelled; with a new ``payload`` or due time,
    when given), or every step in dlq or cancelled, with the cancelled steps downstream of
    it (see the module docstring); the record after it. 409 when there is nothing to
    retry."""
    store = deps.store
    if workflow.status is WorkflowStatus.CREATING:
        raise _conflict(workflow, "it is still being stored")
    steps = await store.workflow_steps(workflow.id)
    if step_id is None:
        chosen = [job for job in steps if job.status in _RETRYABLE]
        if not chosen:
            raise _conflict(workflow, "no step is in dlq or cancelled")
    else:
        chosen = [job for job in steps if job.id == step_id]
        if not chosen or chosen[0].status not in _RETRYABLE:
            raise _conflict(workflow, "only a step in dlq or cancelled can be retried")
    workflow = await _reopen(deps, workflow)
    retried = await rewait(
        deps, steps, [job.id for job in chosen], payload=payload, scheduled_at=scheduled_at
    )
    log.info(
        "workflow retried",
        extra={"workflow_id": workflow.id, "tenant": workflow.tenant_id, "steps": len(retried)},
    )
    await Settler(deps, by=by).settle(retried)
    return await store.get_workflow(workflow.id)


async def resume_workflows(deps: Deps, steps: Iterable[Job], *, by: str) -> None:
    """After steps were retried by a bulk retry (each now waiting): reopen their
    workflows, put the cancelled steps downstream of them back to waiting, and settle."""
    by_workflow: dict[str, list[str]] = {}
    for job in steps:
        if job.workflow_id is not None:
            by_workflow.setdefault(job.workflow_id, []).append(job.id)
    for workflow_id, ids in by_workflow.items():
        workflow = await _reopen(deps, await deps.store.get_workflow(workflow_id, steps=False))
        everything = await deps.store.workflow_steps(workflow.id)
        retried = await rewait(deps, everything, ids)
        current = {job.id: job for job in everything}
        again = [current[i] for i in ids if i in current and current[i].status is Status.WAITING]
        await Settler(deps, by=by).settle([*retried, *again])


async def _reopen(deps: Deps, workflow: Workflow) -> Workflow:
    for _ in range(PASSES):
        change = states.reopen_workflow(workflow, now=deps.clock.now())
        if (after := await deps.store.apply_workflow(change)) is not None:
            return after
        workflow = await deps.store.get_workflow(workflow.id)
    raise StoreError(f"workflow {workflow.id} kept changing; retry not applied, retry")


async def rewait(
    deps: Deps,
    steps: Sequence[Job],
    ids: Sequence[str],
    *,
    payload: Mapping[str, Any] | None = None,
    scheduled_at: datetime | None = None,
) -> list[Job]:
    """The steps ``ids`` (those in dlq or cancelled; with ``payload`` and ``scheduled_at``,
    when given) and every cancelled step downstream of them back to waiting; the steps as
    retried."""
    by_id = {job.id: job for job in steps}
    spawned: dict[str, list[str]] = {}
    for job in steps:
        if job.spawned_by is not None:
            spawned.setdefault(job.spawned_by, []).append(job.id)
    starts = [by_id[i] for i in ids if i in by_id]
    chosen = {job.id for job in starts if job.status in _RETRYABLE}
    targets = [job for job in starts if job.id in chosen]
    seen = {job.id for job in starts}
    queue = list(seen)
    while queue:
        current = by_id[queue.pop()]
        below = [*(current.step.children if current.step else ()), *spawned.get(current.id, ())]
        for child_id in below:
            child = by_id.get(child_id)
            if child is not None and child.id not in seen and child.status is Status.CANCELLED:
                seen.add(child.id)
                targets.append(child)
                queue.append(child.id)
    now = deps.clock.now()
    changes = [
        states.retry_step(job, now=now, payload=payload, scheduled_at=scheduled_at)
        if job.id in chosen
        else states.retry_step(job, now=now)
        for job in targets
    ]
    results = await deps.store.apply_many(changes)
    return [job for job in results if job is not None]
