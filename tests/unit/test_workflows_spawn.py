"""Fan-out from code: a running step spawns children into its workflow (``ctx.spawn``), each
waiting for it; a step ``afterChildrenOf`` it waits for every child (the chord); a retried
attempt gets back the children the first one stored; an attempt that lost its step cannot
spawn."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.domain.workflows import WorkflowStatus
from jobscheduler.errors import PermanentError, ValidationError
from jobscheduler.handlers import JobContext
from jobscheduler.handlers.children import ChildRequest
from jobscheduler.roles.executor.children import Children
from jobscheduler.store import JobStore

from .conftest import DepsFactory, make_job
from .roles_support import registry_with
from .workflow_support import by_name, create, finished, roles, workflow_body

CHORD = [
    {"name": "plan", "jobType": "plan"},
    {"name": "charge-all", "jobType": "total", "afterChildrenOf": ["plan"]},
]


async def test_spawned_children_run_after_their_spawner_and_the_chord_after_them_all(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    order: list[str] = []
    totals: list[dict[str, Any]] = []

    async def plan(ctx: JobContext) -> dict[str, int]:
        order.append("plan")
        await ctx.spawn_many("charge", {f"order-{i}": {"cents": 100 * i} for i in range(1, 4)})
        await ctx.spawn("charge", {"cents": 5}, key="tip")
        return {"orders": 3}

    async def charge(ctx: JobContext) -> int:
        assert ctx.step is not None
        order.append(ctx.step)
        assert ctx.parents == {"plan": {"orders": 3}}
        return int(ctx.payload["cents"])

    async def total(ctx: JobContext) -> int:
        order.append("charge-all")
        totals.append(dict(ctx.parents))
        return sum(v for k, v in ctx.parents.items() if k != "plan")

    deps = make_deps(registry=registry_with(plan=plan, charge=charge, total=total))
    workflow, _ = await create(deps, workflow_body(CHORD))
    async with roles(deps, ["plan", "charge", "total"]):
        done = await finished(deps, workflow.id)
    assert done.status is WorkflowStatus.COMPLETED
    assert order[0] == "plan"
    assert order[-1] == "charge-all"
    assert sorted(order[1:-1]) == ["plan/order-1", "plan/order-2", "plan/order-3", "plan/tip"]
    assert totals == [
        {
            "plan": {"orders": 3},
            "plan/order-1": 100,
            "plan/order-2": 200,
            "plan/order-3": 300,
            "plan/tip": 5,
        }
    ]
    steps = by_name(await store.workflow_steps(workflow.id))
    assert steps["charge-all"].result == 605
    assert steps["plan/tip"].spawned_by == steps["plan"].id
    assert steps["plan/tip"].idempotency_key == "wf-1/plan/tip"


async def test_a_failed_child_cancels_the_chord(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    async def plan(ctx: JobContext) -> None:
        await ctx.spawn_many("charge", {"good": {}, "bad": {}})

    async def charge(ctx: JobContext) -> None:
        if ctx.step == "plan/bad":
            raise PermanentError("card declined")

    async def total(ctx: JobContext) -> None:
        raise AssertionError("the chord must not run")

    deps = make_deps(registry=registry_with(plan=plan, charge=charge, total=total))
    workflow, _ = await create(deps, workflow_body(CHORD))
    async with roles(deps, ["plan", "charge", "total"]):
        done = await finished(deps, workflow.id)
    assert done.status is WorkflowStatus.FAILED
    steps = by_name(await store.workflow_steps(workflow.id))
    assert steps["plan/good"].status is Status.COMPLETED
    assert steps["plan/bad"].status is Status.DLQ
    assert steps["charge-all"].status is Status.CANCELLED
    assert steps["charge-all"].last_error == "a step plan spawned ended in dlq or cancelled"


async def test_a_retried_attempt_gets_back_the_children_the_first_one_spawned(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    spawned: list[list[str]] = []

    async def plan(ctx: JobContext) -> None:
        jobs = await ctx.spawn_many("noop", {"x": {}, "y": {}})
        spawned.append([job["id"] for job in jobs])
        if ctx.attempt == 1:
            raise RuntimeError("fails after spawning")

    deps = make_deps(registry=registry_with(plan=plan))
    workflow, _ = await create(deps, workflow_body([{"name": "plan", "jobType": "plan"}]))
    async with roles(deps, ["plan", "noop"]):
        done = await finished(deps, workflow.id)
    assert done.status is WorkflowStatus.COMPLETED
    assert len(spawned) == 2
    assert spawned[0] == spawned[1]
    steps = await store.workflow_steps(workflow.id)
    assert len(steps) == 3


async def test_only_a_workflow_step_held_by_the_attempt_can_spawn(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    children = Children(deps)
    plain = make_job(status=Status.RUNNING)
    attempt = children.open(plain, claim="tok")
    with pytest.raises(ValidationError, match="not a workflow step"):
        await children.spawn(attempt, [ChildRequest(job_type="noop", name="a", spawn=True)])
    workflow, [step] = await create(deps, workflow_body([{"name": "s", "jobType": "noop"}]))
    await store.claim_due(deps.clock.now(), 10)
    running = await store.apply(states.pick(step.id, worker="w", token="tok", now=deps.clock.now()))
    assert running is not None
    running = await store.apply(states.start(step.id, token="tok", now=deps.clock.now()))
    assert running is not None
    stale = children.open(running, claim="an-older-token")
    with pytest.raises(ValidationError, match="no longer holds"):
        await children.spawn(stale, [ChildRequest(job_type="noop", name="a", spawn=True)])
    assert len(await store.workflow_steps(workflow.id)) == 1
    mine = children.open(running)
    [child] = await children.spawn(mine, [ChildRequest(job_type="noop", name="a", spawn=True)])
    assert child["status"] == "waiting"
    assert (await store.get(step.id)).step.spawns is True  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="jobType: unknown job type"):
        await children.spawn(mine, [ChildRequest(job_type="nope", name="b", spawn=True)])
