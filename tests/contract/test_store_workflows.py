"""The JobStore contract, workflows: records unique by (tenant, key) and moved by conditional
updates; steps stored waiting, never claimed until released; release, cancel, retry and
settle of a step each apply once, on the version read; the reads that find a workflow's
steps (by workflow, by spawner, marked for their workflow). Run against every adapter."""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status, new_job_id
from jobscheduler.domain.workflows import (
    UNFINISHED_STEPS,
    Workflow,
    WorkflowPlan,
    WorkflowStatus,
    parse_workflow_request,
)
from jobscheduler.errors import DuplicateJob, DuplicateWorkflow, WorkflowNotFound
from jobscheduler.handlers import default_registry
from jobscheduler.store import JobStore
from jobscheduler.store.query import Cursor, JobQuery
from jobscheduler.store.workflows import WorkflowQuery, cursor_after

from .store_support import NOW

LATER = NOW + timedelta(minutes=5)
JOB_TYPES = default_registry().validators()


def plan(key: str = "etl-1", tenant: str = "tenant-a", **kwargs: object) -> WorkflowPlan:
    body = {
        "tenantId": tenant,
        "idempotencyKey": key,
        "steps": [
            {"name": "a", "jobType": "noop"},
            {"name": "b", "jobType": "noop", "dependsOn": ["a"]},
        ],
    }
    return parse_workflow_request(body, now=NOW, job_types=JOB_TYPES, **kwargs)  # type: ignore[arg-type]


async def stored(store: JobStore, made: WorkflowPlan | None = None) -> tuple[Workflow, Job, Job]:
    made = made or plan()
    record = await store.insert_workflow(made.workflow)
    outcomes = await store.insert_many(made.jobs)
    a, b = (o for o in outcomes if isinstance(o, Job))
    return record, a, b


async def test_a_record_round_trips_and_is_unique_by_tenant_and_key(store: JobStore) -> None:
    record, _, _ = await stored(store)
    got = await store.get_workflow(record.id)
    assert got == record
    assert got.status is WorkflowStatus.CREATING
    assert [s.name for s in got.steps] == ["a", "b"]
    assert got.steps[1].depends_on == ("a",)
    with pytest.raises(DuplicateWorkflow) as taken:
        await store.insert_workflow(plan().workflow)
    assert taken.value.existing_id == record.id
    other = await store.insert_workflow(plan(tenant="tenant-b").workflow)
    assert other.tenant_id == "tenant-b"
    light = await store.get_workflow(record.id, steps=False)
    assert light == attrs.evolve(record, steps=())


async def test_another_tenants_or_a_missing_record_is_not_found(store: JobStore) -> None:
    record, _, _ = await stored(store)
    assert (await store.get_workflow(record.id, tenant="tenant-a")).id == record.id
    with pytest.raises(WorkflowNotFound):
        await store.get_workflow(record.id, tenant="tenant-b")
    with pytest.raises(WorkflowNotFound):
        await store.get_workflow(new_job_id())
    assert await store.workflow_steps(record.id, tenant="tenant-b") == []


async def test_steps_keep_their_links_and_waiting_steps_are_never_claimed(
    store: JobStore,
) -> None:
    record, a, _ = await stored(store)
    steps = await store.workflow_steps(record.id)
    assert [(s.step.name if s.step else None, s.status) for s in steps] == [
        ("a", Status.WAITING),
        ("b", Status.WAITING),
    ]
    assert steps[0].step == a.step
    assert steps[0].step_dirty is True
    assert steps[1].step_dirty is False
    assert steps[1].step is not None
    assert steps[1].step.parents == (a.id,)
    assert await store.claim_due(LATER, 10) == []


async def test_a_step_key_is_an_idempotency_key_like_any_job(store: JobStore) -> None:
    _, a, _ = await stored(store)
    with pytest.raises(DuplicateJob) as taken:
        await store.insert(attrs.evolve(a, id=new_job_id()))
    assert taken.value.existing_id == a.id


async def test_a_release_applies_once_and_the_step_is_then_claimed(store: JobStore) -> None:
    _, a, _ = await stored(store)
    change = states.release_step(a, now=LATER)
    released = await store.apply(change)
    assert released is not None
    assert released.status is Status.PENDING
    assert released.scheduled_at == LATER
    assert released.step_dirty is False
    assert await store.apply(change) is None  # a second releaser loses
    [claimed] = await store.claim_due(LATER, 10)
    assert claimed.id == a.id


async def test_two_racing_releases_of_one_step_release_it_once(store: JobStore) -> None:
    _, a, _ = await stored(store)
    results = await store.apply_many(
        [states.release_step(a, now=LATER), states.release_step(a, now=LATER)]
    )
    assert sum(r is not None for r in results) == 1


async def test_a_release_decided_on_a_stale_read_does_not_apply(store: JobStore) -> None:
    _, a, _ = await stored(store)
    stale = states.release_step(a, now=LATER)
    cancelled = await store.apply(states.cancel_step(a, now=NOW, reason="parent x failed"))
    assert cancelled is not None
    assert cancelled.last_error == "parent x failed"
    again = await store.apply(states.retry_step(cancelled, now=NOW + timedelta(seconds=1)))
    assert again is not None
    assert again.status is Status.WAITING
    assert await store.apply(stale) is None
    assert (await store.get(a.id)).status is Status.WAITING


async def test_settle_clears_the_mark_unless_the_step_moved_since(store: JobStore) -> None:
    _, a, _ = await stored(store)
    assert (await store.steps_to_settle(LATER, 10))[0].id == a.id
    cleared = await store.apply(states.settle_step(a))
    assert cleared is not None
    assert cleared.step_dirty is False
    assert cleared.updated_at == a.updated_at
    assert await store.steps_to_settle(LATER, 10) == []
    cancelled = await store.apply(states.cancel_step(cleared, now=LATER, reason="x"))
    assert cancelled is not None
    retried = await store.apply(states.retry_step(cancelled, now=LATER + timedelta(seconds=1)))
    assert retried is not None
    assert await store.apply(states.settle_step(cancelled)) is None  # moved since
    assert (await store.get(a.id)).step_dirty is True


async def test_clear_marks_clears_each_step_still_marked_as_read_and_nothing_else(
    store: JobStore,
) -> None:
    _, a, b = await stored(store)
    _, c, _ = await stored(store, plan("etl-2"))
    cancelled = await store.apply(states.cancel_step(c, now=LATER, reason="x"))
    assert cancelled is not None
    assert cancelled.step_dirty is True  # marked again by its end, after ``c`` was read

    assert await store.clear_marks([a, c, b]) == 1

    cleared = await store.get(a.id)
    assert cleared == attrs.evolve(a, step_dirty=False)
    assert (await store.get(c.id)).step_dirty is True
    assert (await store.get(b.id)).step_dirty is False
    assert await store.clear_marks([]) == 0


async def test_steps_to_settle_are_the_marked_ones_older_than_the_cutoff_oldest_first(
    store: JobStore,
) -> None:
    _, a, _ = await stored(store)
    _, c, _ = await stored(store, plan("etl-2"))
    assert await store.steps_to_settle(NOW, 10) == []
    found = await store.steps_to_settle(LATER, 10)
    assert {job.id for job in found} == {a.id, c.id}
    assert len(await store.steps_to_settle(LATER, 1)) == 1


async def test_any_job_probes_a_workflows_steps_by_status_and_a_spawners_children(
    store: JobStore,
) -> None:
    record, a, _ = await stored(store)
    assert await store.any_job(JobQuery(tenant_id=None, workflow_id=record.id))
    unfinished = JobQuery(tenant_id=None, workflow_id=record.id, statuses=UNFINISHED_STEPS)
    assert await store.any_job(unfinished)
    done = JobQuery(tenant_id=None, workflow_id=record.id, statuses=(Status.COMPLETED,))
    assert not await store.any_job(done)
    assert not await store.any_job(JobQuery(tenant_id=None, spawned_by=a.id))
    child = attrs.evolve(a, id=new_job_id(), idempotency_key="etl-1/a/c1", spawned_by=a.id)
    await store.insert(child)
    assert await store.any_job(JobQuery(tenant_id=None, spawned_by=a.id))
    waiting = await store.find_jobs(
        JobQuery(tenant_id=None, spawned_by=a.id, statuses=(Status.WAITING,)), 10
    )
    assert [job.id for job in waiting] == [child.id]


async def test_record_moves_are_conditional_and_a_finish_loses_to_a_reopen(
    store: JobStore,
) -> None:
    record, _, _ = await stored(store)
    opened = await store.apply_workflow(states.open_workflow(record, now=LATER))
    assert opened is not None
    assert opened.status is WorkflowStatus.RUNNING
    assert await store.apply_workflow(states.open_workflow(record, now=LATER)) is None
    stale_finish = states.finish_workflow(opened, status=WorkflowStatus.FAILED, now=LATER)
    reopened = await store.apply_workflow(states.reopen_workflow(opened, now=LATER))
    assert reopened is not None
    assert reopened.version == opened.version + 1
    assert await store.apply_workflow(stale_finish) is None
    finished = await store.apply_workflow(
        states.finish_workflow(reopened, status=WorkflowStatus.COMPLETED, now=LATER)
    )
    assert finished is not None
    assert finished.status is WorkflowStatus.COMPLETED
    assert finished.finished_at == LATER


async def test_a_cancel_request_and_an_abandon_are_written_on_the_record(store: JobStore) -> None:
    record, _, _ = await stored(store)
    abandoned = await store.apply_workflow(
        states.abandon_workflow(record, now=LATER, reason="its create never finished")
    )
    assert abandoned is not None
    assert abandoned.last_error == "its create never finished"
    record2, _, _ = await stored(store, plan("etl-2"))
    opened = await store.apply_workflow(states.open_workflow(record2, now=NOW))
    assert opened is not None
    cancelling = await store.apply_workflow(states.request_workflow_cancel(opened, now=LATER))
    assert cancelling is not None
    assert cancelling.cancel_requested_at == LATER
    assert cancelling.status is WorkflowStatus.RUNNING


async def test_workflows_are_listed_newest_first_by_tenant_status_and_key_in_pages(
    store: JobStore,
) -> None:
    made = []
    for i in range(5):
        p = plan(f"etl-{i}")
        workflow = attrs.evolve(p.workflow, created_at=NOW + timedelta(seconds=i))
        made.append(await store.insert_workflow(workflow))
    await store.insert_workflow(plan("other", tenant="tenant-b").workflow)
    mine = WorkflowQuery(tenant_id="tenant-a")
    first = await store.find_workflows(mine, 2)
    assert [w.idempotency_key for w in first] == ["etl-4", "etl-3"]
    rest = await store.find_workflows(mine, 10, cursor_after(first[-1]))
    assert [w.idempotency_key for w in rest] == ["etl-2", "etl-1", "etl-0"]
    opened = await store.apply_workflow(states.open_workflow(made[1], now=LATER))
    assert opened is not None
    running = WorkflowQuery(tenant_id="tenant-a", statuses=(WorkflowStatus.RUNNING,))
    assert [w.id for w in await store.find_workflows(running, 10)] == [made[1].id]
    prefixed = await store.find_workflows(WorkflowQuery(tenant_id=None, key_prefix="oth"), 10)
    assert [w.tenant_id for w in prefixed] == ["tenant-b"]
    old = WorkflowQuery(tenant_id="tenant-a", created_before=NOW + timedelta(seconds=2))
    assert {w.idempotency_key for w in await store.find_workflows(old, 10)} == {"etl-0", "etl-1"}
    assert await store.find_workflows(mine, 10, Cursor(at=NOW, id=made[0].id)) == []


async def test_a_listing_without_steps_leaves_them_out_but_counts_them(store: JobStore) -> None:
    made = []
    for i in range(3):
        p = plan(f"etl-{i}")
        workflow = attrs.evolve(p.workflow, created_at=NOW + timedelta(seconds=i))
        made.append(await store.insert_workflow(workflow))
    mine = WorkflowQuery(tenant_id="tenant-a")
    first = await store.find_workflows(mine, 2, steps=False)
    assert first == [attrs.evolve(w, steps=()) for w in reversed(made[1:])]
    assert [w.step_count for w in first] == [2, 2]
    rest = await store.find_workflows(mine, 2, cursor_after(first[-1]), steps=False)
    assert [(w.id, w.steps, w.step_count) for w in rest] == [(made[0].id, (), 2)]
    full = await store.find_workflows(mine, 10)
    assert full == list(reversed(made))
