"""What a user can do to jobs: cancel, retry (replay), and control cron templates.

Each action reads the job, decides from its status which transition of
:mod:`jobscheduler.domain.states` applies, and applies it (one conditional update). A lost race is
re-decided from a fresh read (a bounded number of times), so every action either answers
with the job as it is after the action, is a no-op on a job already where the action would
take it (idempotent), or raises :class:`~jobscheduler.errors.InvalidTransition` naming the
status that forbids it. The bulk actions are in :mod:`.bulk`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, ParamSpec, Protocol, TypeVar

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status, cron_policy_of, utc
from jobscheduler.errors import DuplicateJob, InvalidTransition, StoreError
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.scheduler import cron_firing
from jobscheduler.roles.workflows import actions as workflow_actions
from jobscheduler.roles.workflows.settle import Settler

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class Caller(Protocol):
    """How a bulk action makes each store call (e.g. ``BoundedCalls.call``)."""

    def __call__(
        self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs
    ) -> Awaitable[T]: ...


async def direct(fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
    """The default Caller: just the call."""
    return await fn(*args, **kwargs)


#: Fresh reads an action makes after losing a race before it gives up (503).
RACE_RETRIES = 5


@attrs.frozen(kw_only=True)
class Outcome:
    """An action's result: the job after it, and whether anything changed."""

    job: Job
    changed: bool


#: Decides an action for the job as read: the Change to apply, a no-op Outcome, or raises.
Plan = Callable[[Job], "states.Change | Outcome"]


def _fields(job: Job) -> dict[str, Any]:
    return {"job_id": job.id, "tenant": job.tenant_id, "job_type": job.job_type}


def _conflict(job: Job, message: str) -> InvalidTransition:
    return InvalidTransition(
        f"job {job.id} is {job.status.value}: {message}", job_id=job.id, status=job.status.value
    )


def _require_template(job: Job) -> str:
    if job.cron is None:
        raise _conflict(job, "not a cron template")
    return job.cron


async def _decide(deps: Deps, job: Job, plan: Plan, action: str) -> Outcome:
    """Apply ``plan(job)`` (a Change, an Outcome for a no-op, or raises) until it does not
    lose a race; each loss re-reads the job."""
    for _ in range(RACE_RETRIES):
        decision = plan(job)
        if isinstance(decision, Outcome):
            return decision
        after = await deps.store.apply(decision)
        if after is not None:
            log.info(
                "job action applied",
                extra={**_fields(after), "action": action, "status": after.status.value},
            )
            return Outcome(job=after, changed=True)
        deps.metrics.transitions_lost.labels(transition=decision.transition).inc()
        job = await deps.store.get(job.id, tenant=job.tenant_id)
    raise StoreError(f"job {job.id} kept changing; {action} not applied, retry")


# ------------------------------------------------------------------------------- one job


async def cancel(deps: Deps, job: Job) -> Outcome:
    """pending/queued/claimed (or a paused template) -> cancelled; running -> cancel
    requested (the executor finishes it); cancelled: no-op; other finished jobs: 409."""

    def plan(job: Job) -> states.Change | Outcome:
        now = deps.clock.now()
        if job.status in states.CANCELLABLE:
            return states.cancel(job, now=now)
        if job.status is Status.RUNNING:
            if job.cancel_requested_at is not None:
                return Outcome(job=job, changed=False)
            return states.request_cancel(job, now=now)
        if job.status is Status.CANCELLED:
            return Outcome(job=job, changed=False)
        raise _conflict(job, "a finished job cannot be cancelled")

    outcome = await _decide(deps, job, plan, "cancelled")
    if outcome.changed and outcome.job.status is Status.CANCELLED:
        # A workflow step: the steps waiting for it are cancelled too (or run anyway).
        await Settler(deps, by="api").settle([outcome.job])
    return outcome


async def retry(
    deps: Deps,
    job: Job,
    *,
    scheduled_at: datetime | None = None,
    payload: Mapping[str, Any] | None = None,
) -> Outcome:
    """dlq/cancelled -> pending (a replay). A template is due at its next fire time after
    now; a one-off job at ``scheduled_at`` (default now). Other statuses: 409. A workflow
    step is retried with its workflow: it waits for its parents again, with the steps its
    failure cancelled (:func:`~jobscheduler.roles.workflows.actions.retry_workflow`)."""
    if job.workflow_id is not None:
        return await _retry_step(deps, job, scheduled_at=scheduled_at, payload=payload)

    def plan(job: Job) -> states.Change:
        if job.status not in states.RETRYABLE:
            raise _conflict(job, "only dlq or cancelled jobs can be retried")
        now = deps.clock.now()
        due = scheduled_at
        if job.cron is not None:
            due = next_fire(job, now)
        return states.retry(job, now=now, scheduled_at=due, payload=payload)

    outcome = await _decide(deps, job, plan, "retried")
    if deps.waker is not None:
        deps.waker.notify(outcome.job.scheduled_at)
    return outcome


async def _retry_step(
    deps: Deps,
    job: Job,
    *,
    scheduled_at: datetime | None,
    payload: Mapping[str, Any] | None,
) -> Outcome:
    if job.status not in states.RETRYABLE:
        raise _conflict(job, "only dlq or cancelled jobs can be retried")
    assert job.workflow_id is not None
    workflow = await deps.store.get_workflow(job.workflow_id, steps=False)
    await workflow_actions.retry_workflow(
        deps, workflow, step_id=job.id, by="api", payload=payload, scheduled_at=scheduled_at
    )
    return Outcome(job=await deps.store.get(job.id, tenant=job.tenant_id), changed=True)


def next_fire(template: Job, now: datetime) -> datetime:
    """The template's first fire time after ``now`` (in its zone, by its policy)."""
    assert template.cron is not None
    return utc(cron_policy_of(template).next_fire(template.cron, now))


async def pause(deps: Deps, job: Job) -> Outcome:
    """A template: pending -> paused; paused: no-op; retired or dead: 409."""
    _require_template(job)

    def plan(job: Job) -> states.Change | Outcome:
        if job.status is Status.PAUSED:
            return Outcome(job=job, changed=False)
        if job.status is not Status.PENDING:
            raise _conflict(job, "only an active template can be paused")
        return states.pause(job, now=deps.clock.now())

    return await _decide(deps, job, plan, "paused")


async def resume(deps: Deps, job: Job) -> Outcome:
    """A template: paused -> pending at its next fire time after now (missed fire times do
    not run, and are recorded in its ledger as skipped, reason ``paused``); pending: no-op;
    retired or dead: 409."""
    _require_template(job)
    paused: Job | None = None

    def plan(job: Job) -> states.Change | Outcome:
        nonlocal paused
        if job.status is Status.PENDING:
            return Outcome(job=job, changed=False)
        if job.status is not Status.PAUSED:
            raise _conflict(job, "only a paused template can be resumed")
        now = deps.clock.now()
        paused = job
        return states.resume(job, next_at=next_fire(job, now), now=now)

    outcome = await _decide(deps, job, plan, "resumed")
    if deps.waker is not None:
        deps.waker.notify(outcome.job.scheduled_at)
    if outcome.changed and paused is not None:
        await _record_paused(deps, paused, outcome.job)
    return outcome


async def _record_paused(deps: Deps, paused: Job, resumed: Job) -> None:
    """The ledger's ``paused`` skips: the fire times from the one the template held when it
    was paused up to (not including) the one it resumes at. The resume has applied by now,
    so a store failure here is logged, not raised: the ledger misses those records, and the
    resumed template is what the caller gets."""
    try:
        await cron_firing.record_paused(deps, paused, until=resumed.scheduled_at)
    except StoreError as exc:
        log.warning(
            "paused fire times not recorded in the ledger",
            extra={**_fields(resumed), "error": str(exc)},
        )


async def retire(deps: Deps, job: Job) -> Outcome:
    """``DELETE``: a template -> cancelled (never fires again; its runs stay); already
    cancelled: no-op. A one-off job is cancelled with ``POST /jobs/{id}/cancel`` instead."""
    _require_template(job)

    def plan(job: Job) -> states.Change | Outcome:
        if job.status is Status.CANCELLED:
            return Outcome(job=job, changed=False)
        return states.retire(job, now=deps.clock.now())

    return await _decide(deps, job, plan, "retired")


async def trigger(deps: Deps, job: Job) -> Job:
    """One run of an active or paused template now, identified by (template, fire time
    ``now``) like any scheduled run (a trigger in the same millisecond as another run of it
    is a 409 naming that run)."""
    _require_template(job)
    if job.status not in (Status.PENDING, Status.PAUSED):
        raise _conflict(job, "a retired or dead template cannot be triggered")
    now = deps.clock.now()
    run = states.spawn_instance(job, fire_at=now, now=now)
    try:
        run = await deps.store.insert(run)
    except DuplicateJob:
        # A run is identified by (template_id, fire_at), not by its key: only this
        # template's run of this fire time makes the trigger a duplicate (a 409 naming it).
        # Another job of the tenant holding the key gets the run a key of its own, as the
        # scheduler does.
        existing = await deps.store.find_run(job.id, now, tenant=job.tenant_id)
        if existing is not None:
            raise DuplicateJob(
                f"template {job.id} already has a run for {now.isoformat()}",
                existing_id=existing.id,
            ) from None
        run = await deps.store.insert(
            attrs.evolve(run, idempotency_key=f"{run.idempotency_key}-{run.id}")
        )
    if deps.waker is not None:
        deps.waker.notify(run.scheduled_at)
    log.info("cron template triggered", extra={**_fields(job), "instance_id": run.id})
    return run


async def update_template(deps: Deps, job: Job, changes: Mapping[str, Any]) -> Outcome:
    """Change an active or paused template in place (``changes``: Job fields, validated by
    the caller). A new schedule moves the next fire time to the new schedule's first fire
    after now. Conditional on the version read: a concurrent change makes it a 409."""
    _require_template(job)
    if job.status not in (Status.PENDING, Status.PAUSED):
        raise _conflict(job, "only an active or paused template can be updated")
    now = deps.clock.now()
    fields = dict(changes)
    if "cron" in fields or "cron_policy" in fields:
        expression = fields.get("cron", job.cron)
        policy = fields.get("cron_policy", cron_policy_of(job))
        fields["scheduled_at"] = utc(policy.next_fire(expression, now))
    after = await deps.store.apply(states.update_template(job, fields=fields, now=now))
    if after is None:
        current = await deps.store.get(job.id, tenant=job.tenant_id)
        raise InvalidTransition(
            f"template {job.id} changed while this update was applied; read it and retry",
            job_id=job.id,
            status=current.status.value,
        )
    if deps.waker is not None:
        deps.waker.notify(after.scheduled_at)
    log.info("cron template updated", extra={**_fields(after), "fields": sorted(changes)})
    return Outcome(job=after, changed=True)


__all__ = [
    "Caller",
    "Outcome",
    "cancel",
    "direct",
    "next_fire",
    "pause",
    "resume",
    "retire",
    "retry",
    "trigger",
    "update_template",
]
