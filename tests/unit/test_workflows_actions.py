"""A user's cancel and retry of a workflow: cancelling cancels every unfinished step (a
running one through its executor); retrying a failed step resumes the workflow from there
without running again what completed."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from jobscheduler.domain.model import Status
from jobscheduler.domain.workflows import WorkflowStatus
from jobscheduler.errors import InvalidTransition, PermanentError
from jobscheduler.handlers import JobContext
from jobscheduler.roles.workflows.actions import cancel_workflow, retry_workflow
from jobscheduler.store import JobStore

from .conftest import DepsFactory
from .roles_support import StepRecorder, registry_with
from .workflow_support import by_name, chain, create, finished, roles, workflow_body


async def test_cancel_cancels_every_unfinished_step_and_stops_the_running_one(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    started = trio.Event()

    async def sleepy(ctx: JobContext) -> None:
        started.set()
        await trio.sleep(3600)

    deps = make_deps(registry=registry_with(sleepy=sleepy))
    body = workflow_body(
        [
            {"name": "a", "jobType": "sleepy"},
            {"name": "b", "jobType": "sleepy", "dependsOn": ["a"]},
            {"name": "c", "jobType": "noop", "dependsOn": ["b"]},
        ]
    )
    workflow, _ = await create(deps, body)
    async with roles(deps, ["sleepy", "noop"]):
        await started.wait()
        after = await cancel_workflow(deps, workflow, by="api")
        assert after.cancel_requested_at is not None
        done = await finished(deps, workflow.id)
    assert done.status is WorkflowStatus.CANCELLED
    steps = by_name(await store.workflow_steps(workflow.id))
    assert {n: s.status for n, s in steps.items()} == dict.fromkeys("abc", Status.CANCELLED)
    assert steps["a"].last_error == "cancelled while running"
    assert await cancel_workflow(deps, done, by="api") == done  # a no-op


async def test_retrying_the_failed_step_resumes_without_rerunning_what_completed(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    runs: list[str] = []
    broken = {"b"}

    async def work(ctx: JobContext) -> str:
        assert ctx.step is not None
        runs.append(ctx.step)
        if ctx.step in broken:
            raise PermanentError(f"{ctx.step} is broken")
        return ctx.step

    deps = make_deps(registry=registry_with(work=work))
    workflow, _ = await create(deps, workflow_body(chain("abcd", "work")))
    async with roles(deps, ["work"]):
        failed = await finished(deps, workflow.id)
        assert failed.status is WorkflowStatus.FAILED
        with pytest.raises(InvalidTransition):
            await cancel_workflow(deps, failed, by="api")
        broken.clear()
        step_b = by_name(await store.workflow_steps(workflow.id))["b"]
        reopened = await retry_workflow(deps, failed, step_id=step_b.id, by="api")
        assert reopened.status is WorkflowStatus.RUNNING
        assert reopened.version == failed.version + 1
        done = await finished(deps, workflow.id)
    assert done.status is WorkflowStatus.COMPLETED
    assert runs == ["a", "b", "b", "c", "d"]
    steps = by_name(await store.workflow_steps(workflow.id))
    assert steps["b"].run == 1
    assert steps["a"].run == 0
    with pytest.raises(InvalidTransition, match="no step is in dlq or cancelled"):
        await retry_workflow(deps, done, by="api")


async def test_retrying_a_cancelled_workflow_runs_what_it_had_not_run(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    work = StepRecorder()
    deps = make_deps(registry=registry_with(work=work.run))
    body = workflow_body(
        [
            {"name": "a", "jobType": "work", "scheduledAt": "2026-01-01T01:00:00Z"},
            {"name": "b", "jobType": "work", "dependsOn": ["a"]},
            {"name": "c", "jobType": "work", "dependsOn": ["b"]},
        ]
    )
    workflow, _ = await create(deps, body)
    cancelled = await cancel_workflow(deps, workflow, by="api")
    assert cancelled.status is WorkflowStatus.CANCELLED
    async with roles(deps, ["work"]):
        await retry_workflow(deps, cancelled, by="api")
        done = await finished(deps, workflow.id, bound=7200, poll=10)
    assert done.status is WorkflowStatus.COMPLETED
    assert work.ran == ["a", "b", "c"]
