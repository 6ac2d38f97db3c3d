"""The workflow record: what a workflow is as a whole, beside the jobs that are its steps.

The record is small and changes rarely: its key, its declared steps (names, the ids of their
jobs, the dependencies as declared), and a status that follows the steps' (:data:`OUTCOMES`).
The steps themselves are ordinary jobs carrying ``workflow_id`` and a
:class:`~jobscheduler.domain.steps.Step`; only :mod:`jobscheduler.domain.states` moves the
record between statuses, each move one conditional update (:class:`WorkflowChange`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs

from jobscheduler.domain.model import (
    Job,
    Status,
    _aware,
    format_time,
    optional_time,
    present,
)
from jobscheduler.domain.steps import OnParentFailure


class WorkflowStatus(enum.StrEnum):
    """Where a workflow is: it follows its steps."""

    #: Being stored: its steps are not all stored yet, and none runs. Not listed; a create
    #: repeated with its key finishes storing it (the reaper does, or gives up on it).
    CREATING = "creating"
    #: Some step is unfinished (waiting, pending, ... running).
    RUNNING = "running"
    #: Every step completed.
    COMPLETED = "completed"
    #: Every step ended, and some step ended in ``dlq``.
    FAILED = "failed"
    #: Every step ended, some cancelled (by a user, or because a step they wait for failed),
    #: none in ``dlq``.
    CANCELLED = "cancelled"


#: A workflow that has ended (a retry of one of its steps opens it again).
FINISHED: tuple[WorkflowStatus, ...] = (
    WorkflowStatus.COMPLETED,
    WorkflowStatus.FAILED,
    WorkflowStatus.CANCELLED,
)
#: The statuses a listing shows (a workflow still being stored is not one yet).
LISTED: tuple[WorkflowStatus, ...] = (WorkflowStatus.RUNNING, *FINISHED)


@attrs.frozen(kw_only=True)
class DeclaredStep:
    """One step as its workflow's create declared it."""

    name: str
    job_id: str
    depends_on: tuple[str, ...] = ()
    after_children_of: tuple[str, ...] = ()
    on_parent_failure: OnParentFailure = OnParentFailure.CANCEL

    def to_json(self) -> dict[str, Any]:
        """How every store keeps it (:meth:`from_json` reads it back)."""
        out: dict[str, Any] = {"name": self.name, "jobId": self.job_id}
        if self.depends_on:
            out["dependsOn"] = list(self.depends_on)
        if self.after_children_of:
            out["afterChildrenOf"] = list(self.after_children_of)
        if self.on_parent_failure is not OnParentFailure.CANCEL:
            out["onParentFailure"] = self.on_parent_failure.value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeclaredStep:
        return cls(
            name=str(data["name"]),
            job_id=str(data["jobId"]),
            depends_on=tuple(data.get("dependsOn", ())),
            after_children_of=tuple(data.get("afterChildrenOf", ())),
            on_parent_failure=OnParentFailure(data.get("onParentFailure", "cancel")),
        )


@attrs.frozen(kw_only=True)
class Workflow:
    """One workflow record (its steps are jobs: see the module docstring)."""

    id: str
    tenant_id: str
    idempotency_key: str
    status: WorkflowStatus
    #: Its declared steps; empty when a store was asked to leave them out (a listing, a
    #: settle), which still gives their number (``step_count``).
    steps: tuple[DeclaredStep, ...]
    step_count: int = attrs.field(
        default=attrs.Factory(lambda self: len(self.steps), takes_self=True)
    )
    #: Counts the moves that reopen or cancel it: a finish computed from an older read does
    #: not apply (``states.finish_workflow`` is conditioned on it).
    version: int = 0
    created_at: datetime = attrs.field(validator=_aware)
    updated_at: datetime = attrs.field(validator=_aware)
    finished_at: datetime | None = attrs.field(default=None, validator=_aware)
    #: A user cancelled it: no step is released any more, every waiting one is cancelled.
    cancel_requested_at: datetime | None = attrs.field(default=None, validator=_aware)
    #: For a workflow a cron template spawned: the template, and the fire time it stands for.
    template_id: str | None = None
    fire_at: datetime | None = attrs.field(default=None, validator=_aware)
    #: Why it was given up while being stored (``creating`` for too long).
    last_error: str | None = None

    def declared(self, name: str) -> DeclaredStep | None:
        return next((step for step in self.steps if step.name == name), None)


#: The :class:`Workflow` fields that hold a time.
WORKFLOW_TIME_FIELDS: Final = frozenset(
    {"created_at", "updated_at", "finished_at", "cancel_requested_at", "fire_at"}
)


#: The statuses of an unfinished step (``paused`` too, though only a cron template is ever
#: paused): a workflow with one has not ended, a step waiting for a spawner's children waits
#: while one of them is in one.
UNFINISHED_STEPS: Final[tuple[Status, ...]] = (
    Status.WAITING,
    Status.PENDING,
    Status.QUEUED,
    Status.CLAIMED,
    Status.RUNNING,
    Status.PAUSED,
)
_FAILED_ENDS = frozenset({Status.DLQ, Status.FAILED})

#: How a workflow's steps' statuses give its outcome: the first group that one of its steps
#: is in decides it (None: not finished); in none, every step completed. So a workflow is
#: completed when every step completed, failed when one ended in dlq, else cancelled. A
#: store answers each group with one indexed probe (``any_job``): finishing a workflow of
#: 10,000 steps does not read them.
OUTCOMES: Final[tuple[tuple[tuple[Status, ...], WorkflowStatus | None], ...]] = (
    (UNFINISHED_STEPS, None),
    (tuple(sorted(_FAILED_ENDS)), WorkflowStatus.FAILED),
    (
        tuple(s for s in Status if s not in {*UNFINISHED_STEPS, *_FAILED_ENDS, Status.COMPLETED}),
        WorkflowStatus.CANCELLED,
    ),
)


def workflow_to_json(workflow: Workflow, steps: Sequence[Job] | None = None) -> dict[str, Any]:
    """The API's shape of a workflow; with ``steps`` (its jobs), every step with its status
    (declared ones first, in their order, then spawned ones, oldest first) and the counts of
    the steps by status."""
    out: dict[str, Any] = {
        "id": workflow.id,
        "tenantId": workflow.tenant_id,
        "idempotencyKey": workflow.idempotency_key,
        "status": workflow.status.value,
        "stepCount": workflow.step_count,
        "createdAt": format_time(workflow.created_at),
        "updatedAt": format_time(workflow.updated_at),
    }
    out.update(
        present(
            finishedAt=optional_time(workflow.finished_at),
            cancelRequestedAt=optional_time(workflow.cancel_requested_at),
            templateId=workflow.template_id,
            fireAt=optional_time(workflow.fire_at),
            lastError=workflow.last_error,
        )
    )
    if steps is not None:
        out["steps"] = steps_to_json(workflow, steps)
        counts: dict[str, int] = {}
        for job in steps:
            counts[job.status.value] = counts.get(job.status.value, 0) + 1
        out["counts"] = counts
    return out


def steps_to_json(workflow: Workflow, steps: Sequence[Job]) -> list[dict[str, Any]]:
    """Each step of ``workflow`` (its jobs ``steps``) as the API shows it."""
    by_id = {job.id: job for job in steps}
    names = {job.id: job.step.name for job in steps if job.step is not None}
    declared_ids = [step.job_id for step in workflow.steps]
    spawned = sorted(
        (job for job in steps if job.id not in set(declared_ids)),
        key=lambda job: (job.created_at, job.id),
    )
    ordered = [by_id[i] for i in declared_ids if i in by_id] + spawned
    declared = {step.job_id: step for step in workflow.steps}
    out = []
    for job in ordered:
        step = job.step
        if step is None:
            continue
        as_declared = declared.get(job.id)
        item: dict[str, Any] = {
            "name": step.name,
            "jobId": job.id,
            "jobType": job.job_type,
            "status": job.status.value,
            "dependsOn": list(as_declared.depends_on)
            if as_declared is not None
            else [names.get(p, p) for p in step.parents],
        }
        if as_declared is not None and as_declared.after_children_of:
            item["afterChildrenOf"] = list(as_declared.after_children_of)
        item["attempts"] = job.attempts
        item["scheduledAt"] = format_time(job.scheduled_at)
        item["updatedAt"] = format_time(job.updated_at)
        if step.on_parent_failure is not OnParentFailure.CANCEL:
            item["onParentFailure"] = step.on_parent_failure.value
        if job.spawned_by is not None:
            item["spawnedBy"] = names.get(job.spawned_by, job.spawned_by)
        if job.last_error is not None:
            item["lastError"] = job.last_error
        out.append(item)
    return out
