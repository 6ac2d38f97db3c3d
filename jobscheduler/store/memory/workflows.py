"""The memory store's workflow records, unique by (tenant, key), and the reads of steps."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.states import WorkflowChange
from jobscheduler.domain.workflows import Workflow, WorkflowStatus
from jobscheduler.errors import DuplicateWorkflow, WorkflowNotFound
from jobscheduler.store.query import Cursor, JobQuery, Sort, keyset_page
from jobscheduler.store.workflows import STEPS_TO_SETTLE, TenantScope, WorkflowQuery

from .codec import copy_json, job_out, keep
from .conn import MemoryConnection


def _holds(workflow: Workflow, expect: dict[str, Any]) -> bool:
    """Every expectation of a WorkflowChange: a tuple is "any of these", None "unset"."""
    for field, expected in expect.items():
        current = getattr(workflow, field)
        if isinstance(expected, tuple):
            if current not in expected:
                return False
        elif expected is None:
            if current is not None:
                return False
        elif current != (utc(expected) if isinstance(expected, datetime) else expected):
            return False
    return True


class MemoryWorkflowsMixin(MemoryConnection):
    """Workflow records by id, with their (tenant, key) unique index."""

    def __init__(self) -> None:
        super().__init__()
        self._workflows: dict[str, Workflow] = {}
        self._workflow_keys: dict[tuple[str, str], str] = {}

    async def insert_workflow(self, workflow: Workflow) -> Workflow:
        await self._enter()
        held = self._workflow_keys.get((workflow.tenant_id, workflow.idempotency_key))
        if held is not None:
            raise DuplicateWorkflow(
                f"idempotencyKey {workflow.idempotency_key!r} is already used by another workflow",
                existing_id=held,
            )
        stored = keep(workflow)
        self._workflows[workflow.id] = stored
        self._workflow_keys[(workflow.tenant_id, workflow.idempotency_key)] = workflow.id
        return stored

    async def get_workflow(
        self, workflow_id: str, *, tenant: str | None = None, steps: bool = True
    ) -> Workflow:
        await self._enter()
        workflow = self._workflows.get(workflow_id)
        if workflow is None or (tenant is not None and workflow.tenant_id != tenant):
            raise WorkflowNotFound(f"workflow {workflow_id} not found")
        return workflow if steps else attrs.evolve(workflow, steps=())

    async def find_workflows(
        self,
        query: WorkflowQuery,
        limit: int,
        after: Cursor | None = None,
        *,
        steps: bool = True,
    ) -> list[Workflow]:
        await self._enter()
        found = [w for w in self._workflows.values() if query.matches(w)]
        page = keyset_page(found, Sort.CREATED_DESC, limit, after)
        return page if steps else [attrs.evolve(w, steps=()) for w in page]

    async def apply_workflow(self, change: WorkflowChange) -> Workflow | None:
        await self._enter()
        workflow = self._workflows.get(change.workflow_id)
        if workflow is None or not _holds(workflow, dict(change.expect)):
            return None
        updated = keep(attrs.evolve(workflow, **change.set))
        self._workflows[workflow.id] = updated
        return updated

    async def workflow_steps(self, workflow_id: str, *, tenant: str | None = None) -> list[Job]:
        await self._enter()
        query = JobQuery(tenant_id=tenant, workflow_id=workflow_id)
        steps = [job for job in self._jobs if query.matches(job)]
        steps.sort(key=lambda job: (job.created_at, job.id))
        return [job_out(job) for job in steps]

    async def any_job(self, query: JobQuery) -> bool:
        await self._enter()
        return any(query.matches(job) for job in self._jobs)

    async def spawned_results(self, spawner: str) -> dict[str, Any]:
        await self._enter()
        completed = JobQuery(tenant_id=None, spawned_by=spawner, statuses=(Status.COMPLETED,))
        return {
            job.step.name: copy_json(job.result)
            for job in self._jobs
            if completed.matches(job) and job.step is not None
        }

    async def steps_to_settle(self, before: datetime, limit: int) -> list[Job]:
        await self._enter()
        cutoff = utc(before)
        found = [j for j in self._jobs if STEPS_TO_SETTLE.matches(j) and j.updated_at < cutoff]
        found.sort(key=lambda job: (job.updated_at, job.id))
        return [job_out(job) for job in found[:limit]]

    async def expired_workflows(
        self, status: WorkflowStatus, before: datetime, limit: int, scope: TenantScope
    ) -> list[Workflow]:
        await self._enter()
        cutoff = utc(before)
        found = [
            w
            for w in self._workflows.values()
            if w.status is status
            and w.finished_at is not None
            and w.finished_at < cutoff
            and scope.admits(w.tenant_id)
        ]
        found.sort(key=lambda w: (w.finished_at, w.id))
        return [attrs.evolve(w, steps=()) for w in found[:limit]]

    async def delete_workflow_record(self, workflow: Workflow) -> bool:
        await self._enter()
        current = self._workflows.get(workflow.id)
        finished = None if workflow.finished_at is None else utc(workflow.finished_at)
        if current is None:
            return True
        if (current.status, current.finished_at) != (workflow.status, finished):
            return False
        del self._workflows[workflow.id]
        del self._workflow_keys[(current.tenant_id, current.idempotency_key)]
        return True
