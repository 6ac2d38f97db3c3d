"""``POST /workflows`` validated as a whole: named steps, each an ordinary job body plus its
dependencies, become a :class:`WorkflowPlan` -- the workflow record and its step jobs -- or a
:class:`~jobscheduler.errors.ValidationError` naming the problem (an unknown name, a cycle,
too many steps, a step body ``POST /jobs`` would refuse). Nothing here does I/O, so nothing is
stored when the answer is a 400.

Every step's job is built by :func:`~jobscheduler.domain.validation.parse_create_request`, the
validation of ``POST /jobs``, from the step's body with the workflow's tenant, a key derived
from the workflow's (``<workflow key>/<step name>``) and ``scheduledAt`` defaulting to now.
Each is stored ``waiting``; a step without parents (a root) is marked for the workflow to act
on (``step_dirty``), so a root the create did not release is found by the reaper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from jobscheduler.domain.model import Job, Status, format_time, new_job_id, utc
from jobscheduler.domain.steps import MAX_STEPS, OnParentFailure, Step
from jobscheduler.domain.validation import PayloadValidator, check_text, parse_create_request
from jobscheduler.errors import ValidationError

from ._record import DeclaredStep, Workflow, WorkflowStatus

#: Longest step name (it is part of the step's idempotency key).
MAX_STEP_NAME = 64
#: Longest workflow idempotency key (step keys append ``/<name>`` to it).
MAX_WORKFLOW_KEY = 128

_WORKFLOW_FIELDS = frozenset({"tenantId", "idempotencyKey", "steps"})
_STEP_FIELDS = frozenset(
    {
        "name",
        "jobType",
        "payload",
        "priority",
        "scheduledAt",
        "maxAttempts",
        "dependsOn",
        "afterChildrenOf",
        "onParentFailure",
    }
)


@attrs.frozen(kw_only=True)
class WorkflowPlan:
    """What a valid create stores: the record (``creating``) and its steps (``waiting``)."""

    workflow: Workflow
    jobs: tuple[Job, ...]

    @property
    def roots(self) -> tuple[Job, ...]:
        """The steps that wait for nothing."""
        return tuple(job for job in self.jobs if job.step is not None and not job.step.parents)


def parse_workflow_request(
    body: Any,
    *,
    now: datetime,
    job_types: Mapping[str, PayloadValidator | None],
    max_attempts_defaults: Mapping[str, int] | None = None,
    workflow_id: str | None = None,
    job_ids: Mapping[str, str] | None = None,
    extra_fields: frozenset[str] = frozenset(),
) -> WorkflowPlan:
    """Validate a ``POST /workflows`` body (see the module docstring). ``workflow_id`` and
    ``job_ids`` (step name -> job id) give the ids to use (a create repeated with its key
    finishes storing the workflow it began); fresh ones otherwise. ``extra_fields`` are
    accepted and ignored (a cron template's schedule)."""
    if not isinstance(body, dict):
        raise ValidationError("request body must be a JSON object")
    unknown = sorted(set(body) - _WORKFLOW_FIELDS - extra_fields)
    if unknown:
        raise ValidationError(f"unknown field(s): {', '.join(unknown)}")
    tenant = _text(body.get("tenantId"), "tenantId", 256)
    key = _text(body.get("idempotencyKey"), "idempotencyKey", MAX_WORKFLOW_KEY)
    raw_steps = body.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ValidationError("steps: a non-empty list of steps is required")
    if len(raw_steps) > MAX_STEPS:
        raise ValidationError(f"steps: at most {MAX_STEPS} steps (got {len(raw_steps)})")
    declared = _declare(raw_steps)
    _check_acyclic(declared)
    now = utc(now)
    workflow_id = workflow_id or new_job_id()
    ids = {name: (job_ids or {}).get(name) or new_job_id() for name in declared}
    children: dict[str, list[str]] = {name: [] for name in declared}
    chords: dict[str, list[str]] = {name: [] for name in declared}
    for name, (_, depends, after) in declared.items():
        for parent in _unique([*depends, *after]):
            children[parent].append(ids[name])
        for spawner in after:
            chords[spawner].append(ids[name])
    jobs: list[Job] = []
    steps: list[DeclaredStep] = []
    for i, (name, (raw, depends, after)) in enumerate(declared.items()):
        on_failure = _on_parent_failure(raw, i, name)
        step = Step(
            name=name,
            parents=tuple(ids[p] for p in _unique([*depends, *after])),
            children=tuple(children[name]),
            chords=tuple(chords[name]),
            after_children_of=tuple(ids[p] for p in after),
            on_parent_failure=on_failure,
        )
        job = _step_job(
            raw,
            i,
            name,
            tenant=tenant,
            key=key,
            now=now,
            job_types=job_types,
            max_attempts_defaults=max_attempts_defaults,
        )
        jobs.append(
            attrs.evolve(
                job,
                id=ids[name],
                status=Status.WAITING,
                workflow_id=workflow_id,
                step=step,
                step_dirty=not step.parents,
            )
        )
        steps.append(
            DeclaredStep(
                name=name,
                job_id=ids[name],
                depends_on=depends,
                after_children_of=after,
                on_parent_failure=on_failure,
            )
        )
    workflow = Workflow(
        id=workflow_id,
        tenant_id=tenant,
        idempotency_key=key,
        status=WorkflowStatus.CREATING,
        steps=tuple(steps),
        created_at=now,
        updated_at=now,
    )
    return WorkflowPlan(workflow=workflow, jobs=tuple(jobs))


def same_shape(stored: Workflow, plan: WorkflowPlan) -> bool:
    """Whether ``plan`` declares the steps ``stored`` was created with (names, dependencies,
    failure policy): a repeated create may finish storing it only then."""

    def shape(steps: Sequence[DeclaredStep]) -> list[tuple[Any, ...]]:
        return [(s.name, s.depends_on, s.after_children_of, s.on_parent_failure) for s in steps]

    return shape(stored.steps) == shape(plan.workflow.steps)


# ------------------------------------------------------------------ the parts


_Declared = dict[str, tuple[dict[str, Any], tuple[str, ...], tuple[str, ...]]]


def _declare(raw_steps: list[Any]) -> _Declared:
    """Each step by name: its body, its ``dependsOn`` and ``afterChildrenOf`` (names checked:
    known, not the step itself)."""
    declared: _Declared = {}
    for i, raw in enumerate(raw_steps):
        if not isinstance(raw, dict):
            raise ValidationError(f"steps[{i}]: must be a JSON object")
        unknown = sorted(set(raw) - _STEP_FIELDS)
        if unknown:
            raise ValidationError(f"steps[{i}]: unknown field(s): {', '.join(unknown)}")
        name = _text(raw.get("name"), f"steps[{i}].name", MAX_STEP_NAME)
        if "/" in name:
            raise ValidationError(f"steps[{i}].name: must not contain '/'")
        if name in declared:
            raise ValidationError(f"steps[{i}].name: {name!r} names two steps")
        declared[name] = (raw, (), ())
    names = set(declared)
    for i, (name, (raw, _, _)) in enumerate(declared.items()):
        depends = _names(raw, "dependsOn", i, name, names)
        after = _names(raw, "afterChildrenOf", i, name, names)
        declared[name] = (raw, depends, after)
    return declared


def _names(
    raw: Mapping[str, Any], field: str, i: int, name: str, known: set[str]
) -> tuple[str, ...]:
    value = raw.get(field)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"steps[{i}].{field}: a list of step names")
    for other in value:
        if other not in known:
            raise ValidationError(f"steps[{i}].{field}: unknown step {other[:80]!r}")
        if other == name:
            raise ValidationError(f"steps[{i}].{field}: step {name!r} cannot wait for itself")
    return tuple(_unique(value))


def _check_acyclic(declared: _Declared) -> None:
    """ValidationError naming one cycle of the dependencies, if there is one."""
    edges = {name: _unique([*d, *a]) for name, (_, d, a) in declared.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in declared:
        if state.get(start):
            continue
        path: list[str] = [start]
        stack = [iter(edges[start])]
        state[start] = 1
        while stack:
            parent = next(stack[-1], None)
            if parent is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(parent) == 1:
                cycle = [*path[path.index(parent) :], parent]
                raise ValidationError(
                    f"steps: a cycle, each waiting for the next: {' -> '.join(cycle)}"
                )
            elif not state.get(parent):
                state[parent] = 1
                path.append(parent)
                stack.append(iter(edges[parent]))


def _on_parent_failure(raw: Mapping[str, Any], i: int, name: str) -> OnParentFailure:
    value = raw.get("onParentFailure")
    if value is None:
        return OnParentFailure.CANCEL
    try:
        return OnParentFailure(value)
    except ValueError:
        allowed = ", ".join(v.value for v in OnParentFailure)
        raise ValidationError(f"steps[{i}] ({name}).onParentFailure: one of {allowed}") from None


def _step_job(
    raw: Mapping[str, Any],
    i: int,
    name: str,
    *,
    tenant: str,
    key: str,
    now: datetime,
    job_types: Mapping[str, PayloadValidator | None],
    max_attempts_defaults: Mapping[str, int] | None,
) -> Job:
    """The step's job, validated as ``POST /jobs`` validates a create."""
    body = {
        field: raw[field]
        for field in ("jobType", "payload", "priority", "scheduledAt", "maxAttempts")
        if field in raw
    }
    if body.get("scheduledAt") is None:
        body["scheduledAt"] = format_time(now)
    body.update(idempotencyKey=f"{key}/{name}", tenantId=tenant)
    try:
        return parse_create_request(
            body, now=now, job_types=job_types, max_attempts_defaults=max_attempts_defaults
        )
    except ValidationError as exc:
        raise ValidationError(f"steps[{i}] ({name}): {exc}") from None


def _text(value: Any, field: str, limit: int) -> str:
    if value is None:
        raise ValidationError(f"{field} is required")
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{field}: must be a non-empty string")
    return check_text(value, field, limit=limit)


def _unique(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))
