"""Workflows started by jobs: a cron template of the built-in ``start-workflow`` type starts
one workflow per fire time, linked to the template and the fire time; a handler's
``ctx.start_workflow`` (and ``start_workflow_sync`` from a ``def`` handler) starts one in its
job's tenant; a retried attempt gets back the workflow the first one started. On the memory
store, in virtual time."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from jobscheduler.domain.model import Status
from jobscheduler.domain.workflows import WorkflowStatus
from jobscheduler.errors import HandlerError
from jobscheduler.handlers import JobContext, default_registry
from jobscheduler.store import JobStore
from jobscheduler.store.workflows import WorkflowQuery

from .conftest import BASE, DepsFactory, after, make_job
from .roles_support import queue, reached, registry_with, run_on_worker_processes
from .workflow_support import by_name, chain, finished, roles

TEMPLATE_STEPS = chain("ab")


async def test_a_start_workflow_template_starts_one_workflow_per_fire_time(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    template = make_job(
        key="nightly",
        cron="*/5 * * * *",
        scheduled_at=BASE,
        job_type="start-workflow",
        payload={"steps": TEMPLATE_STEPS},
    )
    await store.insert(template)
    async with roles(deps, ["start-workflow", "noop"]):
        await trio.sleep(5 * 60 + 30)  # the fire times BASE and BASE + 5 min

    started = await store.find_workflows(
        WorkflowQuery(tenant_id="tenant-a", template_id=template.id), 10
    )
    assert sorted(w.fire_at for w in started if w.fire_at) == [BASE, after(300)]
    runs = [j for j in await store.list_jobs("tenant-a", None, 100) if j.template_id]
    assert {r.result["workflowId"] for r in runs if r.result} == {w.id for w in started}
    for workflow in started:
        done = await finished(deps, workflow.id)
        assert done.status is WorkflowStatus.COMPLETED
        assert done.template_id == template.id
        steps = by_name(await store.workflow_steps(workflow.id))
        assert {name: job.status for name, job in steps.items()} == {
            "a": Status.COMPLETED,
            "b": Status.COMPLETED,
        }


async def test_a_retried_attempt_gets_back_the_workflow_the_first_one_started(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    seen: list[str] = []

    async def starter(ctx: JobContext) -> str:
        workflow = await ctx.start_workflow(chain("xy"), name="etl")
        seen.append(workflow["id"])
        if ctx.attempt == 1:
            raise HandlerError("the first attempt fails after starting it")
        return str(workflow["id"])

    deps = make_deps(registry=registry_with(starter=starter))
    job = make_job(job_type="starter", max_attempts=2, tenant="tenant-b")
    await store.insert(job)
    async with roles(deps, ["starter", "noop"]):
        await reached(store, job.id, Status.COMPLETED)
        await finished(deps, seen[0])

    assert len(seen) == 2
    assert seen[0] == seen[1]
    [workflow] = await store.find_workflows(WorkflowQuery(tenant_id="tenant-b"), 10)
    assert workflow.id == seen[0]
    assert workflow.idempotency_key == f"{job.id}.etl"
    assert workflow.template_id is None
    assert (await store.get(job.id)).result == seen[0]


def start_from_def(ctx: JobContext) -> str:
    """A module-level def handler (a worker process imports it by name)."""
    return str(ctx.start_workflow_sync([{"name": "only", "jobType": "noop"}])["id"])


@pytest.mark.parametrize("run_in", ["thread", "process"])
async def test_a_def_handler_starts_one_with_start_workflow_sync(
    make_deps: DepsFactory, store: JobStore, run_in: str
) -> None:
    # Real time: the handler runs in a real thread, or a worker process that reaches the
    # executor through its socket.
    registry = default_registry()
    registry.register("starter", start_from_def, run_in=run_in)
    deps = make_deps(registry=registry)
    job = make_job(job_type="starter", tenant="acme")
    await queue(deps, store, job)
    assert await run_on_worker_processes(deps, job) == "completed"
    started = (await store.get(job.id)).result
    workflow = await store.get_workflow(str(started))
    assert workflow.tenant_id == "acme"
    assert workflow.idempotency_key == f"{job.id}.1"
    assert [s.name for s in workflow.steps] == ["only"]


@pytest.mark.parametrize(
    ("steps", "fragment"),
    [
        ([{"name": "a", "jobType": "email"}], "steps[0] (a): jobType: unknown job type 'email'"),
        ([{"name": "a", "jobType": "noop", "dependsOn": ["a"]}], "cannot wait for itself"),
        ("a", "steps: a list of steps"),
    ],
    ids=["unknown-type", "self-loop", "not-a-list"],
)
async def test_a_step_list_the_api_would_refuse_fails_the_attempt_and_stores_nothing(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    steps: Any,
    fragment: str,
) -> None:
    errors: list[str] = []

    async def starter(ctx: JobContext) -> None:
        try:
            await ctx.start_workflow(steps)
        except Exception as exc:
            errors.append(str(exc))
            raise

    deps = make_deps(registry=registry_with(starter=starter))
    job = make_job(job_type="starter", max_attempts=1)
    await store.insert(job)
    async with roles(deps, ["starter"]):
        await reached(store, job.id, Status.DLQ)
    assert len(errors) == 1
    assert fragment in errors[0]
    assert await store.find_workflows(WorkflowQuery(tenant_id=None), 10) == []
