"""Running one job's handler: its context, its logger, and how its end becomes an outcome.

The executor (:mod:`.consume`) picks and starts a job, then calls :func:`run_attempt` inside
the job's :class:`InFlight` scope while its heartbeat loop watches the job; what the handler
did (returned, raised, timed out) comes back as a failure or a result for
:mod:`.settle` to write.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import trio

from jobscheduler.domain.attempts import Failure, encode_result
from jobscheduler.domain.model import Job
from jobscheduler.errors import (
    HandlerTimeout,
    PermanentError,
    ResultError,
    StoreError,
    UnknownHandler,
)
from jobscheduler.handlers import HandlerRegistry, JobContext
from jobscheduler.handlers.registry import HANDLER_LOGGER
from jobscheduler.handlers.runners import HandlerRunner
from jobscheduler.observability.logs import FieldsAdapter
from jobscheduler.observability.tracing import AttemptSpan
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.workflows.reads import CompletedJobs, known_parent_results, parent_results
from jobscheduler.store import JobStore

from .children import Children


def handler_logger(job: Job) -> logging.LoggerAdapter[logging.Logger]:
    """``ctx.logger``: the handler logger with the job's structured fields (names only, so
    it can be rebuilt in a worker process)."""
    return FieldsAdapter(
        logging.getLogger(HANDLER_LOGGER),
        {"job_id": job.id, "tenant": job.tenant_id, "job_type": job.job_type},
    )


class InFlight:
    """A running job, as the executor's shared heartbeat loop sees it."""

    __slots__ = ("cancel_requested", "job_id", "lost", "permanent", "scope", "timed_out", "token")

    def __init__(self, job_id: str, token: str) -> None:
        self.job_id = job_id
        self.token = token
        self.scope = trio.CancelScope()
        self.lost = False
        #: A user asked to cancel the job: its handler is stopped and the job cancelled.
        self.cancel_requested = False
        #: The handler raised PermanentError: dead-letter without further attempts.
        self.permanent = False
        #: The handler ran past its timeout and was stopped.
        self.timed_out = False


#: Bound of reading a workflow step's ``ctx.parents`` before its handler runs.
PARENTS_TIMEOUT = 10.0


async def read_parents(
    store: JobStore, job: Job, completed: CompletedJobs | None = None
) -> tuple[dict[str, Any], Failure | None]:
    """A workflow step's ``ctx.parents`` (empty for any other job), read within
    PARENTS_TIMEOUT (``completed``: parents read before); or, when it cannot be read, the
    failure of the attempt."""
    if job.step is None or not job.step.parents:
        return {}, None
    if completed is not None and (known := known_parent_results(job, completed)) is not None:
        return known, None  # no read: no bound needed (a fan-out's children, each)
    try:
        with trio.fail_after(PARENTS_TIMEOUT):
            return await parent_results(store, job, completed), None
    except (StoreError, trio.TooSlowError) as exc:
        message = f"the results of the steps it waits for could not be read: {exc!r}"
        return {}, Failure(type="StoreError", message=message)


async def run_attempt(
    deps: Deps,
    runner: HandlerRunner,
    job: Job,
    entry: InFlight,
    logger: logging.LoggerAdapter[logging.Logger],
    children: Children | None = None,
) -> tuple[Failure | None, Any, AttemptSpan | None]:
    """Run the handler inside the entry's cancel scope, and inside the attempt's span when
    tracing is on; returns (failure, result, span: the parent of the outcome's, or None
    untraced) and marks the entry ``permanent`` (PermanentError) or ``timed_out``. The
    runner stops the handler at its timeout, and when the scope is cancelled (shutdown, lost
    claim): an async handler is cancelled, a worker process killed, a thread abandoned. The
    result is the handler's return value, checked to be storable (JSON, at most 64 KiB); one
    that is not makes the attempt a failure. With ``children``, the handler's context can
    enqueue jobs (``ctx.enqueue``) and spawn a workflow step's children (``ctx.spawn``)
    while it runs, and a workflow step's context holds its parents' results
    (``ctx.parents``): a step whose parents cannot be read is not run (a failed attempt).
    The jobs it enqueues keep the attempt's span as their trace parent (they join its
    trace), else the job's own."""
    attempt: AbstractContextManager[AttemptSpan | None] = (
        deps.tracing.attempt(job) if deps.tracing.enabled else nullcontext()
    )
    with attempt as span:
        failure: Failure | None = None
        result: Any = None
        parents: dict[str, Any] = {}
        if children is not None:
            parents, failure = await read_parents(children.store, job, children.completed_parents)
        if failure is None:
            trace_parent = span.traceparent if span is not None else job.trace_parent
            enqueuer = (
                children.open(job, trace_parent=trace_parent) if children is not None else None
            )
            try:
                failure, result = await _run(
                    deps.registry, runner, job, entry, logger, enqueuer, parents
                )
            finally:
                if children is not None and enqueuer is not None:
                    children.close(enqueuer)
        if failure is not None and span is not None:
            span.failed(failure.type, failure.message)
        return failure, result, span


async def _run(
    registry: HandlerRegistry,
    runner: HandlerRunner,
    job: Job,
    entry: InFlight,
    logger: logging.LoggerAdapter[logging.Logger],
    enqueuer: Any,
    parents: Mapping[str, Any],
) -> tuple[Failure | None, Any]:
    ctx = JobContext(
        job_id=job.id,
        tenant_id=job.tenant_id,
        job_type=job.job_type,
        payload=job.payload,
        attempt=job.attempts,
        max_attempts=job.max_attempts,
        logger=handler_logger(job),
        idempotency_key=job.idempotency_key,
        scheduled_at=job.scheduled_at,
        template_id=job.template_id,
        workflow_id=job.workflow_id,
        step=job.step.name if job.step is not None else None,
        parents=parents,
        **({"enqueuer": enqueuer} if enqueuer is not None else {}),
    )
    value: Any = None
    with entry.scope:
        try:
            handler = registry.get(job.job_type)
            value = await runner.run(handler, ctx)
            encode_result(value)
        except UnknownHandler as exc:
            return Failure(type=type(exc).__name__, message=str(exc), bare=True), None
        except HandlerTimeout as exc:
            logger.warning("handler timed out", extra={"error": str(exc)})
            entry.timed_out = True
            return Failure(type=type(exc).__name__, message=str(exc), bare=True), None
        except ResultError as exc:
            return Failure(type=type(exc).__name__, message=str(exc)), None
        except PermanentError as exc:
            entry.permanent = True
            return Failure.from_exception(exc), None
        except Exception as exc:
            return Failure.from_exception(exc), None
    return None, value
