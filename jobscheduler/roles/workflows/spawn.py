"""``ctx.spawn``: a running workflow step adds children to its own workflow.

Each child is an ordinary job (validated like ``POST /jobs``, by
:func:`~jobscheduler.domain.validation.parse_create_request`) stored ``waiting`` for its
spawner: it runs once the spawner has completed, with the spawner's result in
``ctx.parents``. Its key derives from the spawner's and the handler's ``key``
(``<spawner key>/<key>``), never from the attempt, so an attempt that runs again gets the
children the first one stored. Its ``children`` are the spawner's ``chords`` -- the steps
declared ``afterChildrenOf`` the spawner -- so each child's end settles them.

The spawn is fenced: before storing, the attempt proves it still holds the spawner (the
first spawn notes on the spawner that it spawns, conditioned on its claim token; later ones
a heartbeat, conditioned the same way). An attempt the reaper took back is refused. (Between
that check and the insert lies one round trip in which the reaper may take the step back; a
child stored then still waits for the step and runs after it.) Each child is stored marked
(``step_dirty``): if its spawner has ended before it was stored, the reaper's sweep settles it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status, job_to_json
from jobscheduler.domain.steps import Step
from jobscheduler.errors import DuplicateJob, ValidationError
from jobscheduler.handlers.children import ChildRequest
from jobscheduler.roles.child_jobs import requested_job
from jobscheduler.roles.deps import Deps
from jobscheduler.store.base import MAX_INSERT_MANY

from .reads import read_jobs


def child_of(deps: Deps, parent: Job, request: ChildRequest) -> Job:
    """The job ``request`` asks ``parent`` to spawn (ValidationError with the API's
    message)."""
    assert parent.step is not None
    key = request.name
    if not key:
        raise ValidationError("ctx.spawn: key is required")
    try:
        job = requested_job(
            deps,
            parent,
            request,
            idempotency_key=f"{parent.idempotency_key}/{key}",
            now=deps.clock.now(),
        )
    except ValidationError as exc:
        raise ValidationError(f"ctx.spawn {key!r}: {exc}") from None
    step = Step(name=f"{parent.step.name}/{key}", parents=(parent.id,), children=parent.step.chords)
    return attrs.evolve(
        job,
        status=Status.WAITING,
        workflow_id=parent.workflow_id,
        spawned_by=parent.id,
        step=step,
        step_dirty=True,
    )


async def spawn_children(
    deps: Deps, parent: Job, token: str, requests: Sequence[ChildRequest], *, first: bool
) -> list[dict[str, Any]]:
    """Store the children ``requests`` ask the step ``parent`` (held by the attempt with
    claim ``token``) to spawn; each as the API shows it, in order (a key spawned before:
    the child stored then). ``first``: this attempt's first spawn (it notes on the step
    that it spawns). Raises ValidationError (a bad request, a step that is not one, an
    attempt that no longer holds the step, a key another job holds) or StoreError."""
    if parent.workflow_id is None or parent.step is None:
        raise ValidationError(
            f"ctx.spawn: job {parent.id} is not a workflow step (ctx.enqueue stores a job)"
        )
    children = [child_of(deps, parent, request) for request in requests]
    store = deps.store
    now = deps.clock.now()
    fence = (
        states.note_spawns(parent, token=token)
        if first
        else states.heartbeat(parent.id, token=token, now=now)
    )
    if await store.apply(fence) is None:
        raise ValidationError(
            f"ctx.spawn: this attempt no longer holds job {parent.id} (taken back, or ended)"
        )
    stored: list[Job | None] = []
    taken: dict[int, str] = {}
    for start in range(0, len(children), MAX_INSERT_MANY):
        chunk = children[start : start + MAX_INSERT_MANY]
        for i, outcome in enumerate(await store.insert_many(chunk), start):
            if isinstance(outcome, Job):
                stored.append(outcome)
            elif isinstance(outcome, DuplicateJob) and outcome.existing_id is not None:
                stored.append(None)
                taken[i] = outcome.existing_id
            else:
                raise outcome
    if taken:
        earlier = {job.id: job for job in await read_jobs(store, list(taken.values()))}
        for i, existing_id in taken.items():
            existing = earlier.get(existing_id)
            if existing is None or existing.spawned_by != parent.id:
                raise ValidationError(
                    f"ctx.spawn: key {requests[i].name!r} is used by another job ({existing_id})"
                )
            stored[i] = existing
    return [job_to_json(job) for job in stored if job is not None]
