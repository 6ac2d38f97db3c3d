"""Finishing a workflow once none of its steps is unfinished (the settle's last act, see
:mod:`.settle`), and reporting a failed one (``workflow.failed``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.notifications import workflow_failed
from jobscheduler.domain.workflows import OUTCOMES, Workflow, WorkflowStatus
from jobscheduler.errors import StoreError
from jobscheduler.roles.deps import Deps
from jobscheduler.store.query import JobQuery

log = logging.getLogger(__name__)


async def finish_if_ended(deps: Deps, record: Workflow) -> Workflow | None:
    """Finish the workflow if none of its steps is unfinished (conditioned on the version
    read before its steps were); the record as finished, or None."""
    store = deps.store
    if record.status is not WorkflowStatus.RUNNING:
        return None
    outcome = await _outcome(deps, record.id)
    if outcome is None:
        return None
    change = states.finish_workflow(record, status=outcome, now=deps.clock.now())
    finished = await store.apply_workflow(change)
    if finished is None:
        return None
    deps.metrics.workflows_finished.labels(status=outcome.value).inc()
    log.info(
        "workflow finished",
        extra={
            "workflow_id": record.id,
            "tenant": record.tenant_id,
            "status": outcome.value,
        },
    )
    if outcome is WorkflowStatus.FAILED:
        await _report_failure(deps, finished, await store.workflow_steps(record.id))
    return finished


async def _outcome(deps: Deps, workflow_id: str) -> WorkflowStatus | None:
    """The outcome its steps' statuses give the workflow (None: one is unfinished), asked
    of the store group by group (:data:`~jobscheduler.domain.workflows.OUTCOMES`): a probe
    each, not a read of every step."""
    for statuses, outcome in OUTCOMES:
        query = JobQuery(tenant_id=None, workflow_id=workflow_id, statuses=statuses)
        if await deps.store.any_job(query):
            return outcome
    return WorkflowStatus.COMPLETED


async def _report_failure(deps: Deps, workflow: Workflow, steps: Sequence[Job]) -> None:
    """Write the ``workflow.failed`` event, naming the step that failed first, for the
    notifier to deliver. It is written right after the finish, not with it: a crash
    between the two loses the event (the finish is not made again)."""
    failed = [s for s in steps if s.status in (Status.DLQ, Status.FAILED)]
    if not failed:
        return
    first = min(failed, key=lambda s: (s.finished_at or s.updated_at, s.id))
    event = workflow_failed(
        workflow_id=workflow.id,
        tenant_id=workflow.tenant_id,
        failed_step=first,
        now=deps.clock.now(),
        key=workflow.idempotency_key,
        template_id=workflow.template_id,
    )
    try:
        await deps.store.record_events([event])
    except StoreError as exc:
        log.warning(
            "workflow.failed event not written",
            extra={"workflow_id": workflow.id, "tenant": workflow.tenant_id, "error": str(exc)},
        )
