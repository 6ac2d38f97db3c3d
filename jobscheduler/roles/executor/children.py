"""The executor's side of ``ctx.enqueue``: jobs a running handler asks to store.

Each attempt gets an :class:`AttemptEnqueuer` on its context while its handler runs (see
:mod:`jobscheduler.handlers.children` for how each runner reaches it). A request becomes a
``POST /jobs`` body and goes through the API's own validation
(:func:`~jobscheduler.domain.validation.parse_create_request`, with every handler's payload
validator) and the store's ``insert`` with an audit record, as a create does; the scheduler
is woken when the job is due before its plan, as after a create.

The new job's tenant is the parent's. Its idempotency key derives from the parent job (and
its run, once a user retried it) and the caller's ``name`` -- by default the call's order in
the attempt (``1``, ``2``, ...) -- never from the attempt number: an attempt that runs again
makes the same calls with the same keys, finds them taken, and gets back the jobs the first
attempt stored.

:class:`Children` also serves the Unix socket that handlers in worker processes send their
requests to, started by the executor when one of its job types runs in a process.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from jobscheduler.domain.audit import AuditRecord
from jobscheduler.domain.model import Job, job_to_json, utc
from jobscheduler.domain.workflows import workflow_to_json
from jobscheduler.errors import DuplicateJob, JobSchedulerError, StoreError, ValidationError
from jobscheduler.handlers.children import (
    ChildRequest,
    NoEnqueuer,
    RemoteEnqueuer,
    WorkflowRequest,
    answer_of,
    answers_of,
    error_reply,
)
from jobscheduler.roles.child_jobs import requested_job
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.workflows.create import start_for_job
from jobscheduler.roles.workflows.reads import CompletedJobs
from jobscheduler.roles.workflows.spawn import spawn_children
from jobscheduler.store import JobStore

from .enqueue_socket import serve_socket

log = logging.getLogger(__name__)

#: The audit action of a job stored by ``ctx.enqueue``.
AUDIT_ACTION = "ctx.enqueue"
#: Bound of the store work of one ``ctx.enqueue`` (insert, and the read of a taken key).
ENQUEUE_TIMEOUT = 10.0
#: Bound of the store work of one ``ctx.start_workflow`` (up to 1,000 steps).
WORKFLOW_TIMEOUT = 60.0


def child_key(parent: Job, name: str) -> str:
    """The idempotency key of the job ``parent`` enqueues under ``name``."""
    run = f".run{parent.run}" if parent.run else ""
    return f"{parent.id}{run}.{name}"


@attrs.define(eq=False)
class AttemptEnqueuer:
    """The enqueuer on one attempt's context (a :class:`~jobscheduler.handlers.children.
    Enqueuer`). Pickled into a worker process it becomes the socket's address and this
    attempt's token."""

    _children: Children
    parent: Job
    token: str
    #: The attempt's claim token (``ctx.spawn`` is fenced on it).
    claim: str | None
    #: The trace the jobs this attempt enqueues join (its span, or the parent's trace).
    trace_parent: str | None = None
    #: Whether this attempt has spawned (its first spawn notes it on the step).
    spawned: bool = attrs.field(default=False, init=False)
    #: One spawn at a time per attempt (the first one notes it on the step).
    spawning: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _order: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    active: bool = attrs.field(default=True, init=False)

    def next_name(self) -> str:
        return str(next(self._order))

    def _on_loop(self, call: str) -> None:
        """Raise unless on the executor's trio loop (where ``call`` awaits the store)."""
        if trio.lowlevel.current_trio_token() is not self._children.trio_token:
            raise RuntimeError(f"{call} runs on its executor's trio loop only")

    def _from_thread(
        self, call: str, what: str, instead: str, answer: Callable[..., Awaitable[Any]], arg: Any
    ) -> Any:
        """``answer(self, arg)`` run on the executor's loop from a handler's thread, its
        reply; ``call`` blocks until ``what`` is stored, so not from trio (use ``instead``)."""
        if trio.lowlevel.in_trio_run():
            raise RuntimeError(
                f"{call} blocks until {what} stored: in an async def handler, "
                f"use await {instead}(...)"
            )
        return trio.from_thread.run(answer, self, arg, trio_token=self._children.trio_token)

    async def enqueue_async(self, request: ChildRequest) -> dict[str, Any]:
        self._on_loop("ctx.enqueue_async")
        return await self._children.enqueue(self, request)

    def enqueue(self, request: ChildRequest) -> dict[str, Any]:
        children = self._children
        reply = self._from_thread(
            "ctx.enqueue", "the job is", "ctx.enqueue_async", children.answer, request
        )
        return answer_of(reply)

    async def spawn_async(self, requests: Sequence[ChildRequest]) -> list[dict[str, Any]]:
        self._on_loop("ctx.spawn")
        return await self._children.spawn(self, requests)

    def spawn(self, requests: Sequence[ChildRequest]) -> list[dict[str, Any]]:
        children = self._children
        reply = self._from_thread(
            "ctx.spawn_sync", "the children are", "ctx.spawn", children.answer_spawn, requests
        )
        return answers_of(reply)

    async def start_workflow_async(self, request: WorkflowRequest) -> dict[str, Any]:
        self._on_loop("ctx.start_workflow")
        return await self._children.start_workflow(self, request)

    def start_workflow(self, request: WorkflowRequest) -> dict[str, Any]:
        children = self._children
        reply = self._from_thread(
            "ctx.start_workflow_sync",
            "the workflow is",
            "ctx.start_workflow",
            children.answer_workflow,
            request,
        )
        return answer_of(reply, "workflow")

    def __reduce__(self) -> tuple[Any, ...]:
        path = self._children.path
        if path is None:
            return (NoEnqueuer, ("the executor serves no socket for worker processes",))
        return (RemoteEnqueuer, (path, self.token))


class Children:
    """Stores the jobs handlers enqueue (see the module doc); one per executor."""

    def __init__(self, deps: Deps) -> None:
        self._deps = deps
        self._attempts: dict[str, AttemptEnqueuer] = {}
        #: Steps whose attempt spawned, until their end is settled (:meth:`took_spawns`).
        self._spawners: set[str] = set()
        self.trio_token: trio.lowlevel.TrioToken | None = None
        #: The Unix socket worker processes send to, while :meth:`serve` runs.
        self.path: str | None = None
        #: Parents of steps this executor ran, kept once completed (``ctx.parents``).
        self.completed_parents = CompletedJobs()

    @property
    def store(self) -> JobStore:
        """The executor's store (a step's ``ctx.parents`` are read from it)."""
        return self._deps.store

    def open(
        self, parent: Job, claim: str | None = None, *, trace_parent: str | None = None
    ) -> AttemptEnqueuer:
        """The enqueuer of an attempt of ``parent`` (holding its claim token ``claim``)
        starting now (close it when it ends); the jobs it stores keep ``trace_parent``."""
        if self.trio_token is None:
            self.trio_token = trio.lowlevel.current_trio_token()
        token = secrets.token_hex(16)
        enqueuer = AttemptEnqueuer(self, parent, token, claim or parent.claim_token, trace_parent)
        self._attempts[token] = enqueuer
        return enqueuer

    def close(self, enqueuer: AttemptEnqueuer) -> None:
        enqueuer.active = False
        self._attempts.pop(enqueuer.token, None)
        if enqueuer.spawned:
            self._spawners.add(enqueuer.parent.id)

    def took_spawns(self, job_id: str) -> bool:
        """Whether an attempt of ``job_id`` spawned children (told once: forgotten after)."""
        if job_id in self._spawners:
            self._spawners.discard(job_id)
            return True
        return False

    async def answer(self, attempt: AttemptEnqueuer, request: ChildRequest) -> dict[str, Any]:
        """:meth:`enqueue` as a reply: ``{"job": ...}`` or ``{"error": ..., "type": ...}``."""
        return await _answered("job", self.enqueue, attempt, request)

    async def answer_spawn(
        self, attempt: AttemptEnqueuer, requests: Sequence[ChildRequest]
    ) -> dict[str, Any]:
        """:meth:`spawn` as a reply: ``{"jobs": [...]}`` or ``{"error": ..., "type": ...}``."""
        return await _answered("jobs", self.spawn, attempt, requests)

    async def answer_workflow(
        self, attempt: AttemptEnqueuer, request: WorkflowRequest
    ) -> dict[str, Any]:
        """:meth:`start_workflow` as a reply: ``{"workflow": ...}`` or an error."""
        return await _answered("workflow", self.start_workflow, attempt, request)

    async def start_workflow(
        self, attempt: AttemptEnqueuer, request: WorkflowRequest
    ) -> dict[str, Any]:
        """Store the workflow ``request`` asks for, in the parent's tenant, under a key
        derived from the parent (:func:`~jobscheduler.roles.workflows.create.start_for_job`);
        the workflow as the API shows it. Raises ValidationError or StoreError."""
        if not attempt.active:
            raise ValidationError(
                "ctx.start_workflow: the attempt that made this context has ended"
            )
        parent = attempt.parent
        name = request.name if request.name is not None else attempt.next_name()
        try:
            with trio.fail_after(WORKFLOW_TIMEOUT):
                workflow, steps = await start_for_job(
                    self._deps, parent, child_key(parent, name), request.steps
                )
        except trio.TooSlowError:
            raise StoreError(
                f"ctx.start_workflow: the store did not answer within {WORKFLOW_TIMEOUT:.0f}s"
            ) from None
        log.info(
            "workflow started by a job",
            extra={"workflow_id": workflow.id, "job_id": parent.id, "tenant": parent.tenant_id},
        )
        return workflow_to_json(workflow, steps)

    async def spawn(
        self, attempt: AttemptEnqueuer, requests: Sequence[ChildRequest]
    ) -> list[dict[str, Any]]:
        """Store the children ``requests`` ask the attempt's step to spawn
        (:func:`~jobscheduler.roles.workflows.spawn.spawn_children`)."""
        if not attempt.active:
            raise ValidationError("ctx.spawn: the attempt that made this context has ended")
        if attempt.claim is None:
            raise ValidationError("ctx.spawn: this attempt holds no claim on its job")
        async with attempt.spawning:
            try:
                with trio.fail_after(ENQUEUE_TIMEOUT):
                    jobs = await spawn_children(
                        self._deps,
                        attempt.parent,
                        attempt.claim,
                        requests,
                        first=not attempt.spawned,
                    )
            except trio.TooSlowError:
                raise StoreError(
                    f"ctx.spawn: the store did not answer within {ENQUEUE_TIMEOUT:.0f}s"
                ) from None
            attempt.spawned = True
        log.debug(
            "workflow step spawned children",
            extra={
                "job_id": attempt.parent.id,
                "tenant": attempt.parent.tenant_id,
                "children": len(jobs),
            },
        )
        return jobs

    async def enqueue(self, attempt: AttemptEnqueuer, request: ChildRequest) -> dict[str, Any]:
        """Store the job ``request`` asks for, in the parent's tenant; the job as the API
        shows it (the one already stored under its key, when a previous attempt made it).
        Raises ValidationError (the API's message) or StoreError."""
        if not attempt.active:
            raise ValidationError("ctx.enqueue: the attempt that made this context has ended")
        deps = self._deps
        parent = attempt.parent
        name = request.name if request.name is not None else attempt.next_name()
        now = deps.clock.now()
        job = requested_job(deps, parent, request, idempotency_key=child_key(parent, name), now=now)
        if attempt.trace_parent is not None:
            job = attrs.evolve(job, trace_parent=attempt.trace_parent)
        record = AuditRecord(
            at=utc(now),
            key_id=None,
            tenant=job.tenant_id,
            action=AUDIT_ACTION,
            job_id=job.id,
            status=201,
            detail=f"from job {parent.id}",
        )
        try:
            with trio.fail_after(ENQUEUE_TIMEOUT):
                try:
                    stored = await deps.store.insert(job, audit=record)
                except DuplicateJob as exc:
                    if exc.existing_id is None:
                        raise
                    # Taken by an earlier attempt of this job: the job it stored.
                    stored = await deps.store.get(exc.existing_id)
                    log.debug(
                        "ctx.enqueue: the key was taken; the job holding it returned",
                        extra={
                            "job_id": stored.id,
                            "parent_id": parent.id,
                            "tenant": job.tenant_id,
                        },
                    )
                    return job_to_json(stored)
        except trio.TooSlowError:
            raise StoreError(
                f"ctx.enqueue: the store did not answer within {ENQUEUE_TIMEOUT:.0f}s"
            ) from None
        if deps.waker is not None:
            deps.waker.notify(stored.scheduled_at)
        log.debug(
            "job enqueued by a handler",
            extra={"job_id": stored.id, "parent_id": parent.id, "tenant": stored.tenant_id},
        )
        return job_to_json(stored)

    def attempt(self, token: str) -> AttemptEnqueuer | None:
        """The running attempt ``token`` names (None: unknown, or its attempt ended)."""
        return self._attempts.get(token)

    async def serve(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve worker processes' requests (:func:`~.enqueue_socket.serve_socket`)."""
        await serve_socket(self, task_status=task_status)


async def _answered(field: str, call: Callable[..., Awaitable[Any]], *args: Any) -> dict[str, Any]:
    """``{field: await call(*args)}``, or the JobSchedulerError it raised as an error reply."""
    try:
        return {field: await call(*args)}
    except JobSchedulerError as exc:
        return error_reply(exc)


__all__ = ["AttemptEnqueuer", "Children", "child_key"]
