"""What a handler receives: :class:`JobContext`, the job it runs and the executor's services
(``ctx.enqueue``) it may call while it runs."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, cast

import attrs

from jobscheduler.domain.model import format_time
from jobscheduler.errors import ValidationError

from .children import MAX_NAME_LENGTH, ChildRequest, Enqueuer, NoEnqueuer, WorkflowRequest
from .tasks import TaskHandle

if TYPE_CHECKING:
    from jobscheduler.client import Job


def _rebuild_context(fields: dict[str, Any], logger_name: str, extra: dict[str, Any]) -> Any:
    """Unpickle a JobContext in a worker process, with a logger rebuilt from its names."""
    from jobscheduler.observability.logs import FieldsAdapter

    return JobContext(**fields, logger=FieldsAdapter(logging.getLogger(logger_name), extra))


class ChildOptions(TypedDict, total=False):
    """The keywords of a job a handler enqueues or spawns (:meth:`JobContext.enqueue`,
    :meth:`JobContext.spawn` and their variants), after its payload and name: ``at`` (an
    aware datetime or RFC3339) or ``delay`` (seconds) sets when it is due, else now;
    ``priority`` and ``max_attempts`` as in ``POST /jobs``."""

    at: datetime | str | None
    delay: float | None
    priority: int | None
    max_attempts: int | None


@attrs.frozen(kw_only=True)
class JobContext:
    """What a handler knows about the job it runs.

    Picklable, so it can cross into a worker process: the logger travels as its name and
    structured fields and is rebuilt on the other side.
    """

    job_id: str
    tenant_id: str
    job_type: str
    payload: Mapping[str, Any]
    attempt: int
    max_attempts: int
    logger: logging.LoggerAdapter[logging.Logger]
    #: The job's idempotency key (a cron run's is ``<template key>-run-<unixnano>``).
    idempotency_key: str = ""
    #: When the job was due (for a retry: when the retry was due).
    scheduled_at: datetime | None = None
    #: For a cron run: the id of the template that spawned it.
    template_id: str | None = None
    #: When this attempt's ``timeout`` runs out (UTC), or None without a timeout.
    deadline: datetime | None = None
    #: How ``enqueue``/``enqueue_async`` reach the executor (see :mod:`.children`).
    enqueuer: Enqueuer = attrs.field(factory=NoEnqueuer, repr=False)
    #: For a workflow step: its workflow and its name there.
    workflow_id: str | None = None
    step: str | None = None
    #: For a workflow step: the result of each job it waited for, by step name
    #: (``ctx.parents["export"]``); for a step waiting for the children a step spawned
    #: (``afterChildrenOf``), theirs too, named ``<spawner>/<key>``.
    parents: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    def enqueue(
        self,
        job_type: str | TaskHandle,
        payload: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        **options: Unpack[ChildOptions],
    ) -> Job:
        """Store a job in this job's tenant, through the executor (no HTTP, no API key),
        from a ``def`` handler; returns it as the API shows it.

        Validated as ``POST /jobs`` would (ValidationError with its message). Its
        idempotency key derives from this job and ``name`` (default: the call's order in
        this attempt), so an attempt that runs again enqueues nothing twice: the repeated
        call returns the job stored the first time. ``at`` or ``delay`` (seconds) sets when
        it is due, else now.
        """
        request = _child_request(job_type, payload, name, **options)
        return cast("Job", self.enqueuer.enqueue(request))

    async def enqueue_async(
        self,
        job_type: str | TaskHandle,
        payload: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        **options: Unpack[ChildOptions],
    ) -> Job:
        """:meth:`enqueue` from an ``async def`` handler."""
        request = _child_request(job_type, payload, name, **options)
        return cast("Job", await self.enqueuer.enqueue_async(request))

    async def spawn(
        self,
        job_type: str | TaskHandle,
        payload: Mapping[str, Any] | None = None,
        *,
        key: str,
        **options: Unpack[ChildOptions],
    ) -> Job:
        """Add a child to this step's workflow, from an ``async def`` handler; returns it as
        the API shows it. The child waits for this step to complete (then
        ``ctx.parents`` holds this step's result), and a step declared with
        ``afterChildrenOf`` naming this one waits for every child it spawns.

        ``key`` names the child among this step's children (its name is
        ``<this step>/<key>``): an attempt that runs again and spawns the same key gets the
        child stored the first time, never a second one. Validated as ``POST /jobs`` would.
        Only a workflow step may spawn (ValidationError otherwise), and only while this
        attempt holds the step.
        """
        request = _spawn_request(job_type, payload, key, **options)
        [job] = await self.enqueuer.spawn_async([request])
        return cast("Job", job)

    async def spawn_many(
        self,
        job_type: str | TaskHandle,
        payloads: Mapping[str, Mapping[str, Any]],
        **options: Unpack[ChildOptions],
    ) -> list[Job]:
        """:meth:`spawn` of one child per key of ``payloads`` (its payload the value), in a
        few round trips: a fan-out of thousands."""
        requests = _spawn_requests(job_type, payloads, **options)
        return cast("list[Job]", await self.enqueuer.spawn_async(requests) if requests else [])

    def spawn_sync(
        self,
        job_type: str | TaskHandle,
        payload: Mapping[str, Any] | None = None,
        *,
        key: str,
        **options: Unpack[ChildOptions],
    ) -> Job:
        """:meth:`spawn` from a ``def`` handler (it blocks until the child is stored)."""
        request = _spawn_request(job_type, payload, key, **options)
        [job] = self.enqueuer.spawn([request])
        return cast("Job", job)

    def spawn_many_sync(
        self,
        job_type: str | TaskHandle,
        payloads: Mapping[str, Mapping[str, Any]],
        **options: Unpack[ChildOptions],
    ) -> list[Job]:
        """:meth:`spawn_many` from a ``def`` handler."""
        requests = _spawn_requests(job_type, payloads, **options)
        return cast("list[Job]", self.enqueuer.spawn(requests) if requests else [])

    async def start_workflow(
        self, steps: Sequence[Mapping[str, Any]], *, name: str | None = None
    ) -> dict[str, Any]:
        """Start a workflow of ``steps`` (each as in ``POST /workflows``) in this job's
        tenant, from an ``async def`` handler; returns it as ``GET /workflows/{id}`` shows it.

        Its idempotency key derives from this job and ``name`` (by default the call's order
        among this attempt's ``enqueue`` and ``start_workflow`` calls): an attempt that runs
        again gets the workflow the first one started, never a second one. Started by a cron
        template's run, the workflow names the template and the fire time (``templateId``,
        ``fireAt``). Validated as ``POST /workflows`` would (ValidationError).
        """
        return await self.enqueuer.start_workflow_async(_workflow_request(steps, name))

    def start_workflow_sync(
        self, steps: Sequence[Mapping[str, Any]], *, name: str | None = None
    ) -> dict[str, Any]:
        """:meth:`start_workflow` from a ``def`` handler (it blocks until it is stored)."""
        return self.enqueuer.start_workflow(_workflow_request(steps, name))

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {
            a.name: getattr(self, a.name) for a in attrs.fields(type(self)) if a.name != "logger"
        }
        fields["payload"] = dict(self.payload)
        fields["parents"] = dict(self.parents)
        extra = dict(self.logger.extra or {})
        return (_rebuild_context, (fields, self.logger.logger.name, extra))


def _check_name(name: str | None) -> None:
    if name is not None and (
        not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_LENGTH
    ):
        raise ValidationError(f"name: a non-empty string of at most {MAX_NAME_LENGTH} characters")


def _child_request(
    job_type: str | TaskHandle,
    payload: Mapping[str, Any] | None,
    name: str | None,
    *,
    at: datetime | str | None = None,
    delay: float | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
) -> ChildRequest:
    """The request of a ``ctx.enqueue`` call, its arguments checked."""
    _check_name(name)
    if at is not None and delay is not None:
        raise ValidationError("give at or delay, not both")
    if delay is not None and (
        isinstance(delay, bool) or not isinstance(delay, int | float) or not delay >= 0
    ):
        raise ValidationError(f"delay: a number of seconds, 0 or more, got {delay!r}")
    scheduled_at: str | None = None
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise ValidationError("at: a timezone-aware datetime is needed")
        scheduled_at = format_time(at)
    elif at is not None:
        scheduled_at = at
    if payload is not None and not isinstance(payload, Mapping):
        raise ValidationError("payload: must be a JSON object (a dict)")
    return ChildRequest(
        job_type=job_type.name if isinstance(job_type, TaskHandle) else job_type,
        payload=dict(payload or {}),
        scheduled_at=scheduled_at,
        delay=None if delay is None else float(delay),
        name=name,
        priority=priority,
        max_attempts=max_attempts,
    )


def _workflow_request(steps: Sequence[Mapping[str, Any]], name: str | None) -> WorkflowRequest:
    """The request of a ``ctx.start_workflow`` call, its arguments checked."""
    _check_name(name)
    if isinstance(steps, str | bytes | Mapping) or not isinstance(steps, Sequence):
        raise ValidationError("steps: a list of steps, each a dict as in POST /workflows")
    return WorkflowRequest(
        steps=[dict(step) if isinstance(step, Mapping) else step for step in steps], name=name
    )


def _spawn_request(
    job_type: str | TaskHandle,
    payload: Mapping[str, Any] | None,
    key: str,
    **options: Unpack[ChildOptions],
) -> ChildRequest:
    """The request of one child of ``ctx.spawn``: a ``ctx.enqueue`` request named ``key``."""
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_NAME_LENGTH:
        raise ValidationError(f"key: a non-empty string of at most {MAX_NAME_LENGTH} characters")
    request = _child_request(job_type, payload, key, **options)
    return attrs.evolve(request, spawn=True)


def _spawn_requests(
    job_type: str | TaskHandle,
    payloads: Mapping[str, Mapping[str, Any]],
    **options: Unpack[ChildOptions],
) -> list[ChildRequest]:
    """The requests of a ``ctx.spawn_many`` call: one child per key of ``payloads``."""
    return [_spawn_request(job_type, payload, key, **options) for key, payload in payloads.items()]
