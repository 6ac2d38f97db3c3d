"""Storing a workflow: without a multi-document transaction, and harmless if cut off anywhere.

The order of the writes is what makes a crash between any two of them harmless:

1. the record, ``creating`` (unique by tenant and key: a second create of the key finds it);
2. the steps, all ``waiting`` in one ``insert_many`` (no step can be claimed: only a release
   makes one pending, and only an open workflow's steps are released);
3. the record opened (``creating -> running``);
4. the roots released (a settle of the steps that wait for nothing).

Cut off after 1 or 2, the record stays ``creating`` and none of its steps runs; the create
repeated with its key (a client retrying a 503 or a lost answer) finds the record, stores
the steps still missing under the ids the record names, and goes on; or the reaper, once the
record is older than :data:`CREATE_GRACE`, opens it if every step is stored and gives it up
(``cancelled``) if not. Cut off after 3, the roots are still marked (``step_dirty``) and the
reaper's sweep releases them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Job
from jobscheduler.domain.workflows import (
    Workflow,
    WorkflowPlan,
    WorkflowStatus,
    parse_workflow_request,
    same_shape,
)
from jobscheduler.errors import DuplicateJob, DuplicateWorkflow, ValidationError
from jobscheduler.roles.deps import Deps
from jobscheduler.store.base import MAX_INSERT_MANY

from .settle import Settler

log = logging.getLogger(__name__)

#: How long a workflow may stay ``creating`` before the reaper finishes or gives it up.
CREATE_GRACE = 300.0


def plan_of(deps: Deps, body: Any, *, workflow_id: str | None = None, **extra: Any) -> WorkflowPlan:
    """The plan of a create body, validated with every handler's payload validator (400s)."""
    return parse_workflow_request(
        body,
        now=deps.clock.now(),
        job_types=deps.registry.validators(),
        max_attempts_defaults=deps.registry.max_attempts_defaults(),
        workflow_id=workflow_id,
        **extra,
    )


async def create_workflow(
    deps: Deps,
    plan: WorkflowPlan,
    *,
    by: str,
    link: Mapping[str, Any] | None = None,
) -> tuple[Workflow, list[Job]]:
    """Store ``plan`` (see the module docstring) and return the workflow with its steps.

    ``link`` sets fields of the record (a cron run's ``template_id`` and ``fire_at``); ``by``
    names the caller in the metrics. Raises DuplicateWorkflow when the key names a workflow
    that is stored (or being stored with other steps), DuplicateJob when a step's key is
    held by another job (the workflow is then given up), StoreError.
    """
    store = deps.store
    workflow = attrs.evolve(plan.workflow, **(link or {}))
    try:
        record = await store.insert_workflow(workflow)
    except DuplicateWorkflow as taken:
        if taken.existing_id is None:
            raise
        record = await store.get_workflow(taken.existing_id)
        if record.status is not WorkflowStatus.CREATING or not same_shape(record, plan):
            raise
        plan = _with_ids_of(record, plan)
        log.info(
            "workflow create resumed",
            extra={"workflow_id": record.id, "tenant": record.tenant_id},
        )
    await _store_steps(deps, record, plan)
    return await open_and_release(deps, record, by=by)


async def start_for_job(
    deps: Deps, parent: Job, key: str, steps: Any
) -> tuple[Workflow, list[Job]]:
    """The workflow of ``steps`` a running job starts (``ctx.start_workflow``): in the job's
    tenant under ``key``, linked to the template and fire time of a cron run. When ``key``
    names a stored workflow (an earlier attempt of the job started it), that workflow."""
    plan = plan_of(deps, {"tenantId": parent.tenant_id, "idempotencyKey": key, "steps": steps})
    link = (
        None
        if parent.template_id is None
        else {"template_id": parent.template_id, "fire_at": parent.fire_at}
    )
    try:
        return await create_workflow(deps, plan, by="executor", link=link)
    except DuplicateWorkflow as taken:
        if taken.existing_id is None:
            raise
        workflow = await deps.store.get_workflow(taken.existing_id)
        return workflow, await deps.store.workflow_steps(workflow.id)


def _with_ids_of(record: Workflow, plan: WorkflowPlan) -> WorkflowPlan:
    """``plan`` under the ids ``record`` names (same shape: checked by the caller)."""
    ids = {step.name: step.job_id for step in record.steps}
    old = {step.name: step.job_id for step in plan.workflow.steps}
    renamed = {old[name]: new for name, new in ids.items()}

    def move(job: Job) -> Job:
        assert job.step is not None
        step = attrs.evolve(
            job.step,
            parents=tuple(renamed[i] for i in job.step.parents),
            children=tuple(renamed[i] for i in job.step.children),
            chords=tuple(renamed[i] for i in job.step.chords),
            after_children_of=tuple(renamed[i] for i in job.step.after_children_of),
        )
        return attrs.evolve(job, id=renamed[job.id], workflow_id=record.id, step=step)

    return WorkflowPlan(workflow=record, jobs=tuple(move(job) for job in plan.jobs))


async def _store_steps(deps: Deps, record: Workflow, plan: WorkflowPlan) -> None:
    """Insert the steps; a step already stored under its own id (an earlier try of this
    create) is fine. A key held by another job, or a step the store refuses, gives the
    workflow up and raises."""
    problem: DuplicateJob | ValidationError | None = None
    for start in range(0, len(plan.jobs), MAX_INSERT_MANY):
        chunk = plan.jobs[start : start + MAX_INSERT_MANY]
        for job, outcome in zip(chunk, await deps.store.insert_many(chunk), strict=True):
            if isinstance(outcome, DuplicateJob) and outcome.existing_id == job.id:
                continue
            if isinstance(outcome, DuplicateJob):
                problem = DuplicateJob(
                    f"step {job.step.name if job.step else job.id}: idempotencyKey "
                    f"{job.idempotency_key!r} is already used by another job",
                    existing_id=outcome.existing_id,
                )
            elif isinstance(outcome, ValidationError):
                problem = outcome
            if problem is not None:
                break
        if problem is not None:
            break
    if problem is not None:
        await give_up(deps, record, reason=f"its steps could not be stored: {problem}")
        raise problem


async def open_and_release(deps: Deps, record: Workflow, *, by: str) -> tuple[Workflow, list[Job]]:
    """Open a ``creating`` record (every step is stored) and release its roots; the
    workflow and its steps as they are then."""
    store = deps.store
    now = deps.clock.now()
    opened = await store.apply_workflow(states.open_workflow(record, now=now))
    if opened is None:  # opened by a racing create or the reaper, or given up meanwhile
        opened = await store.get_workflow(record.id)
    steps = await store.workflow_steps(record.id)
    if opened.status is WorkflowStatus.RUNNING:
        roots = [job for job in steps if job.step is not None and not job.step.parents]
        if (await Settler(deps, by=by).settle(j for j in roots if j.step_dirty)).released:
            steps = await store.workflow_steps(record.id)
    log.info(
        "workflow created",
        extra={
            "workflow_id": opened.id,
            "tenant": opened.tenant_id,
            "steps": len(steps),
            "status": opened.status.value,
        },
    )
    return opened, steps


async def give_up(deps: Deps, record: Workflow, *, reason: str) -> Workflow | None:
    """A ``creating`` record -> cancelled, and its stored steps cancelled (none ever ran:
    the record was never open). None if it was not ``creating`` any more."""
    store = deps.store
    now = deps.clock.now()
    abandoned = await store.apply_workflow(states.abandon_workflow(record, now=now, reason=reason))
    if abandoned is None:
        return None
    steps = await store.workflow_steps(record.id)
    await store.apply_bulk(
        [states.cancel_step(job, now=now, reason=reason) for job in steps if job.step]
    )
    log.warning(
        "workflow given up while being stored",
        extra={"workflow_id": record.id, "tenant": record.tenant_id, "error": reason},
    )
    return abandoned


async def finish_creating(deps: Deps, record: Workflow) -> str:
    """The reaper's move on a record still ``creating`` after CREATE_GRACE: opened (and its
    roots released) when every declared step is stored, else given up. Returns which."""
    steps = await deps.store.workflow_steps(record.id)
    stored = {job.id for job in steps}
    if all(step.job_id in stored for step in record.steps):
        await open_and_release(deps, record, by="reaper")
        return "opened"
    missing = sum(step.job_id not in stored for step in record.steps)
    await give_up(deps, record, reason=f"its create stopped with {missing} step(s) unstored")
    return "given up"
