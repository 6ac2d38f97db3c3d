"""Workflows run by the roles on the memory store, in virtual time: a step runs after every
parent completed, with their results in ``ctx.parents``; a failure cancels the descendants
(or runs a clean-up step); the workflow's status follows its steps."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import trio
import trio.testing

from jobscheduler.domain.model import Job, Status, format_time
from jobscheduler.domain.workflows import WorkflowStatus
from jobscheduler.handlers import JobContext
from jobscheduler.store import JobStore

from .conftest import DepsFactory
from .roles_support import StepRecorder, registry_with
from .workflow_support import by_name, chain, create, finished, roles, workflow_body

DIAMOND = [
    {"name": "a", "jobType": "record"},
    {"name": "b", "jobType": "record", "dependsOn": ["a"]},
    {"name": "c", "jobType": "record", "dependsOn": ["a"]},
    {"name": "d", "jobType": "record", "dependsOn": ["b", "c"]},
]


async def test_a_diamond_runs_each_step_after_its_parents_with_their_results(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    order: list[str] = []
    seen: dict[str, dict[str, Any]] = {}

    async def record(ctx: JobContext) -> dict[str, Any]:
        assert ctx.step is not None
        order.append(ctx.step)
        seen[ctx.step] = dict(ctx.parents)
        await trio.sleep(1 if ctx.step == "b" else 0)
        return {"from": ctx.step}

    deps = make_deps(registry=registry_with(record=record))
    workflow, steps = await create(deps, workflow_body(DIAMOND))
    assert workflow.status is WorkflowStatus.RUNNING
    assert [(s.step.name, s.status) for s in steps if s.step] == [
        ("a", Status.PENDING),
        ("b", Status.WAITING),
        ("c", Status.WAITING),
        ("d", Status.WAITING),
    ]
    async with roles(deps, ["record"]):
        done = await finished(deps, workflow.id)
    assert done.status is WorkflowStatus.COMPLETED
    assert order[0] == "a"
    assert order[-1] == "d"
    assert set(order[1:3]) == {"b", "c"}
    assert seen["a"] == {}
    assert seen["b"] == {"a": {"from": "a"}}
    assert seen["d"] == {"b": {"from": "b"}, "c": {"from": "c"}}
    final = by_name(await store.workflow_steps(workflow.id))
    assert all(job.status is Status.COMPLETED for job in final.values())
    assert not any(job.step_dirty for job in final.values())


async def test_a_completed_workflow_is_finished_without_reading_its_steps(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A fan-out of 10,000 would be decoded whole, on the event loop, to be finished.
    deps = make_deps()
    middle = [{"name": f"m{i}", "jobType": "noop", "dependsOn": ["a"]} for i in range(5)]
    sink = {"name": "z", "jobType": "noop", "dependsOn": [m["name"] for m in middle]}
    workflow, _ = await create(
        deps, workflow_body([{"name": "a", "jobType": "noop"}, *middle, sink])
    )
    reads: list[str] = []
    read = store.workflow_steps

    async def counted(workflow_id: str, *, tenant: str | None = None) -> list[Job]:
        reads.append(workflow_id)
        return await read(workflow_id, tenant=tenant)

    monkeypatch.setattr(store, "workflow_steps", counted)
    async with roles(deps, ["noop"]):
        done = await finished(deps, workflow.id)
    assert done.status is WorkflowStatus.COMPLETED
    assert reads == []


async def test_a_dead_lettered_step_cancels_its_descendants_and_the_workflow_fails(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    work = StepRecorder(failing={"b": "b cannot succeed"})
    deps = make_deps(registry=registry_with(work=work.run))
    workflow, _ = await create(deps, workflow_body(chain("abcd", "work")))
    async with roles(deps, ["work"]):
        done = await finished(deps, workflow.id)
    assert done.status is WorkflowStatus.FAILED
    assert work.ran == ["a", "b"]
    steps = by_name(await store.workflow_steps(workflow.id))
    assert {n: s.status for n, s in steps.items()} == {
        "a": Status.COMPLETED,
        "b": Status.DLQ,
        "c": Status.CANCELLED,
        "d": Status.CANCELLED,
    }
    assert steps["c"].last_error == "b ended dlq"
    assert steps["d"].last_error == "c ended cancelled"
    # The notifier's workflow.failed event, beside b's own job.dlq, names the step that failed.
    events = {e.type.value: e for e in await store.pending_events(10)}
    assert set(events) == {"job.dlq", "workflow.failed"}
    failed = events["workflow.failed"]
    assert failed.tenant_id == workflow.tenant_id
    assert failed.data["workflow"] == {
        "id": workflow.id,
        "idempotencyKey": workflow.idempotency_key,
    }
    assert failed.data["failedStep"]["id"] == steps["b"].id
    assert failed.data["failedStep"]["lastError"].endswith("b cannot succeed")


async def test_a_clean_up_step_runs_after_its_parent_failed(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    work = StepRecorder(failing={"load": "disk full"})
    deps = make_deps(registry=registry_with(work=work.run))
    body = workflow_body(
        [
            {"name": "load", "jobType": "work"},
            {"name": "report", "jobType": "work", "dependsOn": ["load"]},
            {"name": "tidy", "jobType": "work", "dependsOn": ["load"], "onParentFailure": "run"},
        ]
    )
    workflow, _ = await create(deps, body)
    async with roles(deps, ["work"]):
        done = await finished(deps, workflow.id)
    assert work.ran == ["load", "tidy"]
    assert done.status is WorkflowStatus.FAILED
    steps = by_name(await store.workflow_steps(workflow.id))
    assert steps["report"].status is Status.CANCELLED
    assert steps["tidy"].status is Status.COMPLETED


async def test_a_step_waits_for_its_own_scheduled_at_when_it_is_later(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    start = deps.clock.now()
    due = start + timedelta(hours=1)
    body = workflow_body(
        [
            {"name": "a", "jobType": "noop"},
            {"name": "b", "jobType": "noop", "dependsOn": ["a"], "scheduledAt": format_time(due)},
        ]
    )
    workflow, _ = await create(deps, body)
    async with roles(deps, ["noop"]):
        done = await finished(deps, workflow.id, bound=2 * 3600, poll=60)
    assert done.status is WorkflowStatus.COMPLETED
    steps = by_name(await store.workflow_steps(workflow.id))
    [first] = await store.attempts(steps["a"].id)
    [second] = await store.attempts(steps["b"].id)
    assert first.started_at is not None
    assert first.started_at < start + timedelta(seconds=1)
    assert second.started_at is not None
    assert second.started_at >= due
