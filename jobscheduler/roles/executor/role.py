"""The executor role's entry point: an :class:`~.consume.Executor` with its heartbeat,
step-end, children and presence tasks, and one consumer per job type."""

from __future__ import annotations

from collections.abc import Sequence

import trio

from jobscheduler.handlers.runners import open_runner
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.presence import Presence
from jobscheduler.roles.retention import publish_type_retention

from .consume import Executor


async def run_executor(
    deps: Deps,
    job_types: Sequence[str],
    drain: trio.Event | None = None,
    *,
    task_status: trio.TaskStatus[Executor] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The executor role: one consumer per job type, all in this role's nursery.

    When ``drain`` is set, stop receiving and return once running handlers have finished,
    or SHUTDOWN_GRACE later (cancelled handlers hand their jobs back). Reports the
    ``Executor`` when started, for health checks (``Executor.liveness_problem``).
    """
    settings = deps.settings
    async with (
        open_runner(
            now=deps.clock.now,
            log_level=settings.log_level,
            log_format=settings.log_format,
            role="executor-worker",
            process_slots=settings.process_workers or None,
        ) as runner,
        trio.open_nursery() as nursery,
    ):
        executor = Executor(deps, runner)
        await publish_type_retention(deps, job_types)
        await nursery.start(executor.heartbeat_loop)
        await nursery.start(executor.step_ends.run)
        if any(deps.registry.get(name).run_in == "process" for name in job_types):
            # Handlers in worker processes reach ctx.enqueue through this socket.
            await nursery.start(executor.children.serve)
        # The Overview's record of this executor (jobscheduler.roles.presence).
        presence = Presence(
            deps,
            "executor",
            job_types=job_types,
            in_flight=executor.in_flight,
            capacity=deps.settings.executor_concurrency,
        )
        await nursery.start(presence.run)
        async with trio.open_nursery() as consumers:
            for job_type in job_types:
                await consumers.start(executor.consume, job_type)
            task_status.started(executor)
            if drain is not None:
                await drain.wait()
                executor.drain(settings.shutdown_grace)
        nursery.cancel_scope.cancel()
