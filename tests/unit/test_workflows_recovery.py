"""Crash safety of workflows: whatever write a crash cuts off, no step runs before its parents,
none is released twice, none waits for ever. Each test leaves the store as a crash would and
lets the reaper (or a repeated create) finish the work."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.workflows import WorkflowPlan, WorkflowStatus
from jobscheduler.errors import DuplicateJob, DuplicateWorkflow
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.workflows import settle
from jobscheduler.roles.workflows.create import CREATE_GRACE, create_workflow, plan_of
from jobscheduler.roles.workflows.settle import Settler
from jobscheduler.store import JobStore
from jobscheduler.store.workflows import WorkflowQuery

from .conftest import DepsFactory, make_job
from .workflow_support import by_name, chain, create, sweep, workflow_body


async def cut_off(deps: Deps, body: dict[str, Any], stored: int | None = None) -> WorkflowPlan:
    """The plan of a create of ``body`` that stopped after storing its record and its first
    ``stored`` steps (every step when None), never opened."""
    plan = plan_of(deps, body)
    await deps.store.insert_workflow(plan.workflow)
    if stored != 0:
        await deps.store.insert_many(plan.jobs[:stored])
    return plan


async def run_to_end(deps: Deps, store: JobStore, step: Job) -> Job:
    """What an executor writes for ``step`` (pending) up to its completion, and no more:
    the crash comes before anyone settles it."""
    now = deps.clock.now()
    [claimed] = [j for j in await store.claim_due(now, 10) if j.id == step.id]
    picked = await store.apply(states.pick(claimed.id, worker="w", token="t", now=now))
    assert picked is not None
    running = await store.apply(states.start(picked.id, token="t", now=now))
    assert running is not None
    done = await store.apply(states.complete(running, token="t", now=now))
    assert done is not None
    assert done.step_dirty
    return done


async def test_a_step_whose_parents_ended_unsettled_is_released_by_the_reapers_sweep(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    workflow, steps = await create(deps, workflow_body(chain("ab")))
    a = by_name(steps)["a"]
    await run_to_end(deps, store, a)
    await sweep(deps, grace=60.0)  # the mark is younger: left to its writer
    assert by_name(await store.workflow_steps(workflow.id))["b"].status is Status.WAITING
    await trio.sleep(61)
    await sweep(deps, grace=60.0)
    after = by_name(await store.workflow_steps(workflow.id))
    assert after["b"].status is Status.PENDING
    assert not after["a"].step_dirty


async def test_two_settlers_of_one_end_release_its_child_once(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    workflow, steps = await create(deps, workflow_body(chain("ab")))
    done = await run_to_end(deps, store, by_name(steps)["a"])
    results = []
    async with trio.open_nursery() as nursery:
        for by in ("executor", "reaper", "api"):

            async def settle(by: str = by) -> None:
                results.append(await Settler(deps, by=by).settle([done]))

            nursery.start_soon(settle)
    assert sum(r.released for r in results) == 1
    [b] = [j for j in await store.workflow_steps(workflow.id) if j.id != done.id]
    assert b.status is Status.PENDING


async def test_a_create_cut_off_after_its_record_is_finished_by_the_same_key(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    body = workflow_body(chain("abc"))
    first = await cut_off(deps, body, stored=1)  # the crash: b and c never stored
    assert await store.claim_due(deps.clock.now() + timedelta(hours=1), 10) == []
    workflow, steps = await create(deps, body)  # the client's retry, same key
    assert workflow.id == first.workflow.id
    assert workflow.status is WorkflowStatus.RUNNING
    assert [j.id for j in steps] == [j.id for j in first.jobs]
    assert [j.status for j in steps] == [Status.PENDING, Status.WAITING, Status.WAITING]
    with pytest.raises(DuplicateWorkflow) as taken:
        await create(deps, body)
    assert taken.value.existing_id == workflow.id


async def test_a_create_retried_with_other_steps_under_its_key_is_refused(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    await cut_off(deps, workflow_body(chain("ab")), stored=0)
    with pytest.raises(DuplicateWorkflow):
        await create(deps, workflow_body(chain("abc")))


async def test_the_reaper_opens_a_create_cut_off_once_every_step_was_stored(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    plan = await cut_off(deps, workflow_body(chain("ab")))  # the record never opened
    await sweep(deps)
    assert (await store.get_workflow(plan.workflow.id)).status is WorkflowStatus.CREATING
    await trio.sleep(CREATE_GRACE + 1)
    await sweep(deps)
    assert (await store.get_workflow(plan.workflow.id)).status is WorkflowStatus.RUNNING
    steps = by_name(await store.workflow_steps(plan.workflow.id))
    assert (steps["a"].status, steps["b"].status) == (Status.PENDING, Status.WAITING)


async def test_the_reaper_gives_up_a_create_cut_off_before_its_steps_were_stored(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    plan = await cut_off(deps, workflow_body(chain("abc")), stored=2)
    await trio.sleep(CREATE_GRACE + 1)
    await sweep(deps)
    record = await store.get_workflow(plan.workflow.id)
    assert record.status is WorkflowStatus.CANCELLED
    assert record.last_error == "its create stopped with 1 step(s) unstored"
    steps = await store.workflow_steps(plan.workflow.id)
    assert [j.status for j in steps] == [Status.CANCELLED, Status.CANCELLED]
    assert await store.claim_due(deps.clock.now() + timedelta(hours=1), 10) == []


async def test_roots_of_an_opened_create_that_stopped_before_releasing_them_are_released(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    plan = plan_of(deps, workflow_body(chain("ab")))
    record = await store.insert_workflow(plan.workflow)
    await store.insert_many(plan.jobs)
    await store.apply_workflow(states.open_workflow(record, now=deps.clock.now()))
    await trio.sleep(1)  # the restart
    await sweep(deps)  # the start-up sweep: no grace
    steps = by_name(await store.workflow_steps(record.id))
    assert steps["a"].status is Status.PENDING


async def test_a_step_key_held_by_another_job_gives_the_workflow_up(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    squatter = await store.insert(attrs.evolve(make_job(), idempotency_key="wf-1/b"))
    with pytest.raises(DuplicateJob) as taken:
        await create_workflow(deps, plan_of(deps, workflow_body(chain("ab"))), by="api")
    assert taken.value.existing_id == squatter.id
    assert "step b" in str(taken.value)
    records = await store.find_workflows(WorkflowQuery(tenant_id="tenant-a"), 10)
    assert [w.status for w in records] == [WorkflowStatus.CANCELLED]


async def test_a_large_release_is_written_in_chunks_waking_the_scheduler_after_each(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(settle, "RELEASE_CHUNK", 2)
    deps = make_deps()
    root = {"name": "root", "jobType": "noop"}
    children = [{"name": f"c{i}", "jobType": "noop", "dependsOn": ["root"]} for i in range(5)]
    workflow, steps = await create(deps, workflow_body([root, *children]))
    done = await run_to_end(deps, store, by_name(steps)["root"])
    events: list[str] = []
    write = store.apply_many_lean

    async def recorded(changes: Sequence[states.Change], read_back: Sequence[bool]) -> Any:
        events.append(" ".join(change.transition for change in changes))
        return await write(changes, read_back)

    assert deps.waker is not None
    notify = deps.waker.notify
    monkeypatch.setattr(store, "apply_many_lean", recorded)
    monkeypatch.setattr(deps.waker, "notify", lambda due: (events.append("wake"), notify(due)))
    settled = await Settler(deps, by="executor").settle([done])
    assert settled.released == 5
    # The root's mark is cleared with the last releases: a crash before leaves it marked.
    assert events == [
        "release_step release_step",
        "wake",
        "release_step release_step",
        "wake",
        "release_step settle_step",
        "wake",
    ]
    after = await store.workflow_steps(workflow.id)
    assert {j.status for j in after if j.id != done.id} == {Status.PENDING}
    assert not by_name(after)["root"].step_dirty
