"""The store's side of pruning finished workflows: which records are expired (by status,
finish time, tenant), oldest first; a record's delete is conditional on the status and finish
time it was read with, and harmless when repeated. On memory, SQLite and FerretDB."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobscheduler.domain import states
from jobscheduler.domain.workflows import Workflow, WorkflowStatus
from jobscheduler.errors import WorkflowNotFound
from jobscheduler.store import JobStore
from jobscheduler.store.workflows import ALL_TENANTS, TenantScope

from .store_support import NOW
from .test_store_workflows import plan, stored


async def finished(
    store: JobStore, key: str, status: WorkflowStatus, after: float, tenant: str = "tenant-a"
) -> Workflow:
    """A workflow stored, opened and finished ``status`` ``after`` seconds past NOW (its
    steps too, as a finished workflow's are)."""
    record, a, b = await stored(store, plan(key, tenant))
    for step in (a, b):
        cancelled = await store.apply(states.cancel_step(step, now=NOW, reason="finished"))
        assert cancelled is not None
    opened = await store.apply_workflow(states.open_workflow(record, now=NOW))
    assert opened is not None
    at = NOW + timedelta(seconds=after)
    done = await store.apply_workflow(states.finish_workflow(opened, status=status, now=at))
    assert done is not None
    return done


async def test_expired_workflows_are_those_of_the_status_finished_before_oldest_first(
    store: JobStore,
) -> None:
    second = await finished(store, "second", WorkflowStatus.COMPLETED, 20)
    first = await finished(store, "first", WorkflowStatus.COMPLETED, 10)
    await finished(store, "late", WorkflowStatus.COMPLETED, 40)
    await finished(store, "failed", WorkflowStatus.FAILED, 5)
    other = await finished(store, "other", WorkflowStatus.COMPLETED, 15, tenant="tenant-b")
    before = NOW + timedelta(seconds=30)

    found = await store.expired_workflows(WorkflowStatus.COMPLETED, before, 10, ALL_TENANTS)
    assert [w.id for w in found] == [first.id, other.id, second.id]
    assert all(w.steps == () and w.step_count == 2 for w in found)
    oldest = await store.expired_workflows(WorkflowStatus.COMPLETED, before, 1, ALL_TENANTS)
    assert [w.id for w in oldest] == [first.id]
    mine = await store.expired_workflows(
        WorkflowStatus.COMPLETED, before, 10, TenantScope(tenant="tenant-b")
    )
    assert [w.id for w in mine] == [other.id]
    rest = await store.expired_workflows(
        WorkflowStatus.COMPLETED, before, 10, TenantScope(skip_tenants=("tenant-b",))
    )
    assert [w.id for w in rest] == [first.id, second.id]
    # Both conditions hold at once: a tenant that is also skipped admits nothing.
    neither = TenantScope(tenant="tenant-b", skip_tenants=("tenant-b",))
    assert await store.expired_workflows(WorkflowStatus.COMPLETED, before, 10, neither) == []
    failed = await store.expired_workflows(WorkflowStatus.FAILED, before, 10, ALL_TENANTS)
    assert [w.idempotency_key for w in failed] == ["failed"]


async def test_a_record_is_deleted_only_as_it_was_read_and_a_repeat_is_harmless(
    store: JobStore,
) -> None:
    failed = await finished(store, "retried", WorkflowStatus.FAILED, 10)
    # Retried since it was read: it moved on and is kept.
    reopened = await store.apply_workflow(states.reopen_workflow(failed, now=NOW))
    assert reopened is not None
    assert await store.delete_workflow_record(failed) is False
    assert (await store.get_workflow(failed.id)).status is WorkflowStatus.RUNNING

    done = await finished(store, "done", WorkflowStatus.COMPLETED, 10)
    steps = await store.workflow_steps(done.id)
    assert await store.delete_workflow_record(done) is True
    assert await store.delete_workflow_record(done) is True
    with pytest.raises(WorkflowNotFound):
        await store.get_workflow(done.id)
    # Its steps go next (the pruner's order); then its key and theirs are free again.
    assert await store.delete_jobs(steps) == len(steps) == 2
    assert await store.workflow_steps(done.id) == []
    again = await finished(store, "done", WorkflowStatus.COMPLETED, 20)
    assert again.id != done.id
