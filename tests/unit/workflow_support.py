"""What the workflow tests (``test_workflows_*``) share: a body builder, a create through the
roles, the roles running together on the memory store in virtual time, and a wait for a
workflow to finish."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from jobscheduler.domain.model import Job
from jobscheduler.domain.workflows import FINISHED, Workflow
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.executor.role import run_executor
from jobscheduler.roles.reaper.sweeps import Reaper
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.roles.workflows.create import create_workflow, plan_of

from .roles_support import LOOP_BOUND, TERM


def workflow_body(
    steps: Sequence[dict[str, Any]], *, key: str = "wf-1", tenant: str = "tenant-a"
) -> dict[str, Any]:
    return {"tenantId": tenant, "idempotencyKey": key, "steps": list(steps)}


def chain(names: str, job_type: str = "noop") -> list[dict[str, Any]]:
    """One step per letter, each waiting for the one before."""
    return [
        {"name": n, "jobType": job_type, **({"dependsOn": [names[i - 1]]} if i else {})}
        for i, n in enumerate(names)
    ]


async def create(deps: Deps, body: dict[str, Any]) -> tuple[Workflow, list[Job]]:
    return await create_workflow(deps, plan_of(deps, body), by="api")


@asynccontextmanager
async def roles(deps: Deps, job_types: Sequence[str]) -> AsyncIterator[None]:
    """The scheduler's dispatch loop and an executor of ``job_types`` until the block ends
    (the reaper only when a test sweeps: :func:`sweep`)."""
    async with trio.open_nursery() as nursery:
        await nursery.start(run_executor, deps, list(job_types))
        nursery.start_soon(Scheduler(deps).dispatch_loop, TERM)
        yield
        nursery.cancel_scope.cancel()


async def sweep(deps: Deps, *, grace: float = 0.0) -> None:
    """One reaper sweep, the workflows' with ``grace``."""
    await Reaper(deps).sweep(settle_grace=grace)


async def finished(
    deps: Deps, workflow_id: str, bound: float = LOOP_BOUND, poll: float = 0.05
) -> Workflow:
    """The workflow once it has finished (polled every ``poll`` seconds of virtual time,
    within ``bound``)."""
    with trio.fail_after(bound):
        while True:
            record = await deps.store.get_workflow(workflow_id)
            if record.status in FINISHED:
                return record
            await trio.sleep(poll)


def by_name(steps: Sequence[Job]) -> dict[str, Job]:
    return {job.step.name: job for job in steps if job.step is not None}
