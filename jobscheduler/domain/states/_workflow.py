"""The workflows' transitions: how a step leaves ``waiting`` and how a workflow record moves.

A step (a job with ``workflow_id``) is stored ``waiting``. The transition that ends a step
marks it (``step_dirty``: :func:`~._lifecycle.mark_settling`), and whoever acts on the mark
-- the executor that wrote the end, the API, or the reaper's sweep -- reads the steps waiting
for it and their parents, and writes for each ONE of::

    waiting -release_step-> pending     every parent completed (or ended, with
                                        onParentFailure "run"); due at its scheduledAt if later
                                        (the children a completed step spawned: released
                                        together, ``release_spawned``, as each would be)
    waiting -cancel_step-> cancelled    a parent ended in dlq or cancelled, or the workflow
                                        was cancelled (then its own children are looked at)
    dlq/cancelled -retry_step-> waiting a user's retry of the step, or of a step it waits for
    (any) -settle_step-> (same)         nothing (more) to do: the mark is cleared

Each is conditioned on the step's status and version (``updated_at``) as read, so two actors
that read the same step release it once, and a release decided on a stale read (the step was
cancelled and retried meanwhile) does not apply. A parent's ``completed`` never changes (only
``dlq`` and ``cancelled`` can be retried), so a release decided from parents read completed
stays right however late it is written.

The record (:class:`~jobscheduler.domain.workflows.Workflow`) moves by
:class:`WorkflowChange`, the same kind of conditional update::

    creating -open_workflow-> running -finish_workflow-> completed/failed/cancelled
    creating -abandon_workflow-> cancelled           (its create never finished)
    running -request_workflow_cancel-> running + cancelRequestedAt
    any but creating -reopen_workflow-> running      (a retry of a step)
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import attrs

from jobscheduler.domain.model import Job, Status, truncate_error, utc
from jobscheduler.domain.workflows import FINISHED, Workflow, WorkflowStatus

from ._lifecycle import Change, as_read
from ._user_actions import replayed


def release_step(step: Job, *, now: datetime) -> Change:
    """waiting -> pending: what the step waits for has ended as it needs; due at once, or at
    its own ``scheduledAt`` if that is later."""
    now = utc(now)
    return Change(
        transition="release_step",
        job_id=step.id,
        expect=as_read(step, status=Status.WAITING),
        set={**released(now), "scheduled_at": max(utc(step.scheduled_at), now)},
    )


def released(now: datetime) -> dict[str, Any]:
    """What a release writes besides the due time (which it raises to ``now`` when earlier):
    :func:`release_step`'s fields, and what a store's release of a completed step's waiting
    children writes to each (``release_spawned``, one statement for many)."""
    # Through a Change, so the fields are those its rules add to every transition.
    change = Change(
        transition="release_step",
        job_id="",
        expect={"status": Status.WAITING},
        set={"status": Status.PENDING, "step_dirty": False, "updated_at": utc(now)},
    )
    return dict(change.set)


def cancel_step(step: Job, *, now: datetime, reason: str) -> Change:
    """waiting -> cancelled (``reason`` in ``lastError``): a job it waits for failed or was
    cancelled, or its workflow was. Marked, so the steps waiting for it are looked at."""
    now = utc(now)
    return Change(
        transition="cancel_step",
        job_id=step.id,
        expect=as_read(step, status=Status.WAITING),
        set={
            "status": Status.CANCELLED,
            "last_error": truncate_error(reason),
            "claim_token": None,
            "step_dirty": True,
            "updated_at": now,
        },
    )


def retry_step(
    step: Job,
    *,
    now: datetime,
    payload: Mapping[str, Any] | None = None,
    scheduled_at: datetime | None = None,
) -> Change:
    """dlq/cancelled -> waiting: a retry of a workflow step (attempts reset, a Replay kept,
    as :func:`~jobscheduler.domain.states.retry`; a new ``payload`` or due time, when
    given), which then waits for its parents again; marked, so it is released at once if
    they have completed."""
    now = utc(now)
    changes: dict[str, Any] = {
        "status": Status.WAITING,
        **replayed(step, now=now, payload=payload),
        "step_dirty": True,
    }
    if scheduled_at is not None:
        changes["scheduled_at"] = utc(scheduled_at)
    return Change(transition="retry_step", job_id=step.id, expect=as_read(step), set=changes)


def settle_step(step: Job) -> Change:
    """The workflow has acted on the step as read: its mark is cleared. Conditioned on the
    status and version read, so a change made since (a retry) keeps its mark. Writes nothing
    else (not even ``updatedAt``: the step's own times stay what its moves wrote)."""
    return Change(
        transition="settle_step",
        job_id=step.id,
        expect={**as_read(step), "step_dirty": True},
        set={"step_dirty": False},
    )


def note_spawns(step: Job, *, token: str) -> Change:
    """A running step's handler spawns children: its end will look them up. Fenced on the
    claim token, so only the attempt that holds the step notes it."""
    assert step.step is not None
    return Change(
        transition="note_spawns",
        job_id=step.id,
        expect={"status": Status.RUNNING, "claim_token": token},
        set={"step": attrs.evolve(step.step, spawns=True)},
    )


# ------------------------------------------------------------------ the record


@attrs.frozen(kw_only=True)
class WorkflowChange:
    """One conditional update of one workflow record (as :class:`Change` is of a job)."""

    transition: str
    workflow_id: str
    expect: Mapping[str, Any]
    set: Mapping[str, Any]


def open_workflow(workflow: Workflow, *, now: datetime) -> WorkflowChange:
    """creating -> running: every step is stored."""
    return WorkflowChange(
        transition="open_workflow",
        workflow_id=workflow.id,
        expect={"status": WorkflowStatus.CREATING},
        set={"status": WorkflowStatus.RUNNING, "updated_at": utc(now)},
    )


def finish_workflow(workflow: Workflow, *, status: WorkflowStatus, now: datetime) -> WorkflowChange:
    """running -> completed/failed/cancelled, as its steps' ends say. Conditioned on the
    version read before the steps were, so a reopen or a cancel since wins."""
    assert status in FINISHED
    now = utc(now)
    return WorkflowChange(
        transition="finish_workflow",
        workflow_id=workflow.id,
        expect={"status": WorkflowStatus.RUNNING, "version": workflow.version},
        set={"status": status, "finished_at": now, "updated_at": now},
    )


def reopen_workflow(workflow: Workflow, *, now: datetime) -> WorkflowChange:
    """(running or finished) -> running, a new version, no cancel request: a step was
    retried. Conditioned on the version read."""
    now = utc(now)
    return WorkflowChange(
        transition="reopen_workflow",
        workflow_id=workflow.id,
        expect={"status": workflow.status, "version": workflow.version},
        set={
            "status": WorkflowStatus.RUNNING,
            "version": workflow.version + 1,
            "cancel_requested_at": None,
            "finished_at": None,
            "updated_at": now,
        },
    )


def request_workflow_cancel(workflow: Workflow, *, now: datetime) -> WorkflowChange:
    """running -> running with ``cancelRequestedAt``, a new version: no step is released
    any more; the caller cancels the unfinished steps."""
    now = utc(now)
    return WorkflowChange(
        transition="request_workflow_cancel",
        workflow_id=workflow.id,
        expect={"status": WorkflowStatus.RUNNING, "version": workflow.version},
        set={"cancel_requested_at": now, "version": workflow.version + 1, "updated_at": now},
    )


def abandon_workflow(workflow: Workflow, *, now: datetime, reason: str) -> WorkflowChange:
    """creating -> cancelled: its create never finished storing it (``reason``)."""
    now = utc(now)
    return WorkflowChange(
        transition="abandon_workflow",
        workflow_id=workflow.id,
        expect={"status": WorkflowStatus.CREATING},
        set={
            "status": WorkflowStatus.CANCELLED,
            "last_error": truncate_error(reason),
            "finished_at": now,
            "updated_at": now,
        },
    )
