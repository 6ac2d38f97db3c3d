"""The reaper's prune of finished workflows: each is kept by the retention of its outcome
(completed as completed jobs, failed as dead-lettered ones, cancelled as cancelled ones) in
its tenant, then deleted with its steps and their attempt records -- the steps archived first
when there is an archive; a workflow retried since it was read is kept. On the memory store,
in virtual time (its clock reads BASE)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Attempt, Outcome, attempt_to_json
from jobscheduler.domain.model import Status
from jobscheduler.domain.retention import Override, Scope
from jobscheduler.domain.workflows import Workflow, WorkflowStatus
from jobscheduler.roles.reaper.archive import Archive, read_archive
from jobscheduler.roles.reaper.pruning import Pruner
from jobscheduler.roles.workflows.create import plan_of
from jobscheduler.store import JobStore
from jobscheduler.store.workflows import WorkflowQuery

from .conftest import BASE, DepsFactory, sample
from .workflow_support import chain, workflow_body

DAY = timedelta(days=1)


async def finished(
    store: JobStore,
    make_deps: DepsFactory,
    key: str,
    status: WorkflowStatus,
    age: timedelta,
    tenant: str = "tenant-a",
) -> Workflow:
    """A two-step workflow of ``tenant`` that ended ``status`` ``age`` before BASE, its
    steps ended with it (cancelled: the prune reads whatever they ended as)."""
    at = BASE - age
    plan = plan_of(make_deps(), workflow_body(chain("ab"), key=key, tenant=tenant))
    record = await store.insert_workflow(plan.workflow)
    for step in await store.insert_many(plan.jobs):
        assert not isinstance(step, Exception)
        assert await store.apply(states.cancel_step(step, now=at, reason="test")) is not None
    opened = await store.apply_workflow(states.open_workflow(record, now=at))
    assert opened is not None
    done = await store.apply_workflow(states.finish_workflow(opened, status=status, now=at))
    assert done is not None
    return done


async def keys(store: JobStore) -> set[str]:
    found = await store.find_workflows(WorkflowQuery(tenant_id=None), 100)
    return {w.idempotency_key for w in found}


async def test_each_outcome_keeps_its_statuss_retention_and_goes_with_its_steps(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    old = await finished(store, make_deps, "old", WorkflowStatus.COMPLETED, 8 * DAY)
    await finished(store, make_deps, "young", WorkflowStatus.COMPLETED, 6 * DAY)
    await finished(store, make_deps, "failed-20d", WorkflowStatus.FAILED, 20 * DAY)
    dead = await finished(store, make_deps, "failed-31d", WorkflowStatus.FAILED, 31 * DAY)
    cancelled = await finished(store, make_deps, "cancelled", WorkflowStatus.CANCELLED, 8 * DAY)
    deps = make_deps()

    await Pruner(deps).sweep()

    assert await keys(store) == {"young", "failed-20d"}
    for gone in (old, dead, cancelled):
        assert await store.workflow_steps(gone.id) == []
    assert await store.reconcile_counts() == {}
    labels = {"status": "completed"}
    assert sample(deps.metrics, "reaper_pruned_workflows_total", labels) == 1
    assert sample(deps.metrics, "reaper_pruned_workflows_total", {"status": "failed"}) == 1


async def test_a_tenants_own_retention_wins_and_a_retried_workflow_is_kept(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    month = {Status.COMPLETED: (30 * DAY).total_seconds()}
    await store.set_retention(
        Override(scope=Scope.TENANT, name="tenant-b", keep=month, updated_at=BASE)
    )
    await finished(store, make_deps, "b-old", WorkflowStatus.COMPLETED, 8 * DAY, "tenant-b")
    await finished(store, make_deps, "b-older", WorkflowStatus.COMPLETED, 31 * DAY, "tenant-b")
    await finished(store, make_deps, "a-old", WorkflowStatus.COMPLETED, 8 * DAY)
    retried = await finished(store, make_deps, "retried", WorkflowStatus.FAILED, 40 * DAY)
    deps = make_deps()

    # Retried by a user: running again, not failed (the store's delete is conditional on
    # the status read, for a retry that lands between the read and the delete).
    assert await store.apply_workflow(states.reopen_workflow(retried, now=BASE)) is not None

    await Pruner(deps).sweep()

    assert await keys(store) == {"b-old", "retried"}
    assert len(await store.workflow_steps(retried.id)) == 2


async def test_an_archive_gets_the_steps_before_they_are_deleted(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    old = await finished(store, make_deps, "old", WorkflowStatus.COMPLETED, 8 * DAY)
    steps = await store.workflow_steps(old.id)
    lost = Attempt(job_id=steps[0].id, number=1, outcome=Outcome.LOST, finished_at=BASE - 9 * DAY)
    await store.record_attempts([lost])

    await Pruner(make_deps(), Archive(tmp_path)).sweep()

    day = (BASE - 8 * DAY).date().isoformat()
    archived = {row["id"]: row for row in read_archive(tmp_path / "tenant-a" / f"{day}.jsonl.gz")}
    assert sorted(archived) == sorted(s.id for s in steps)
    assert archived[steps[0].id]["attempts"] == [attempt_to_json(lost)]
    assert archived[steps[1].id]["attempts"] == []
    assert await keys(store) == set()
    assert await store.attempts(steps[0].id) == []
