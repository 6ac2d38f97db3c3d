"""The store's port for workflows: their records, and the reads that find a workflow's steps.

A workflow's steps are jobs (the other ports store and move them; they carry
``workflow_id``, a :class:`~jobscheduler.domain.steps.Step` and ``step_dirty``). Beside them,
each workflow has one record (:class:`~jobscheduler.domain.workflows.Workflow`) in its own
table or collection, unique by (tenant, key) like the jobs' keys, moved only by
:class:`~jobscheduler.domain.states.WorkflowChange` conditional updates.

Nothing here needs a multi-document transaction: a create stores the record first
(``creating``), then its steps (``waiting``, so none can run), then opens the record; a crash
in between leaves a record a repeated create (or the reaper) finishes or gives up on.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

import attrs

from jobscheduler.domain.model import Job
from jobscheduler.domain.states import WorkflowChange
from jobscheduler.domain.workflows import Workflow, WorkflowStatus

from .query import Cursor, JobQuery

#: The steps a workflow has not acted on yet (``step_dirty``): what the reaper sweeps for.
STEPS_TO_SETTLE = JobQuery(tenant_id=None, step_dirty=True)


@attrs.frozen(kw_only=True)
class WorkflowQuery:
    """Workflow records matching every given condition (None / empty: no condition), newest
    ``created_at`` first (ties: newest id)."""

    #: None: every tenant (an all-tenant admin, and the reaper).
    tenant_id: str | None
    statuses: tuple[WorkflowStatus, ...] = ()
    #: Keys starting with this text.
    key_prefix: str | None = None
    template_id: str | None = None
    #: ``created_at < created_before``.
    created_before: datetime | None = None

    def matches(self, workflow: Workflow) -> bool:
        """The same conditions in Python (the memory store, and tests)."""
        return (
            (self.tenant_id is None or workflow.tenant_id == self.tenant_id)
            and (not self.statuses or workflow.status in self.statuses)
            and (self.key_prefix is None or workflow.idempotency_key.startswith(self.key_prefix))
            and (self.template_id is None or workflow.template_id == self.template_id)
            and (self.created_before is None or workflow.created_at < self.created_before)
        )


@attrs.frozen(kw_only=True)
class TenantScope:
    """The tenants whose records a sweep reads: ``tenant``'s when given, and none of
    ``skip_tenants``' (the tenants with a rule of their own, swept apart); with neither,
    every tenant's (:data:`ALL_TENANTS`)."""

    tenant: str | None = None
    skip_tenants: tuple[str, ...] = ()

    def admits(self, tenant_id: str) -> bool:
        """Whether a record of ``tenant_id`` is in the scope (the memory store, and tests)."""
        return (self.tenant is None or tenant_id == self.tenant) and (
            tenant_id not in self.skip_tenants
        )


#: Every tenant's records.
ALL_TENANTS = TenantScope()


def cursor_after(workflow: Workflow) -> Cursor:
    """The position of ``workflow`` in a listing: the next page starts after it."""
    return Cursor(at=workflow.created_at, id=workflow.id)


class WorkflowRecords(Protocol):
    """Workflow records, and the reads of their steps."""

    @abc.abstractmethod
    async def insert_workflow(self, workflow: Workflow) -> Workflow:
        """Store a new record and return it as stored. Raises DuplicateWorkflow (with the
        holder's ``existing_id``) when its tenant has a workflow with its key (exactly one
        of several racing inserts of one key succeeds)."""

    @abc.abstractmethod
    async def get_workflow(
        self, workflow_id: str, *, tenant: str | None = None, steps: bool = True
    ) -> Workflow:
        """The record; WorkflowNotFound for an unknown id and, when ``tenant`` is given, for
        another tenant's. ``steps`` False leaves its declared steps out (``steps == ()``,
        ``step_count`` still their number): the settle of every step's end reads only its
        status, version and cancel request, and a workflow may declare a thousand steps."""

    @abc.abstractmethod
    async def find_workflows(
        self,
        query: WorkflowQuery,
        limit: int,
        after: Cursor | None = None,
        *,
        steps: bool = True,
    ) -> list[Workflow]:
        """Up to ``limit`` records matching ``query``, newest ``created_at`` first (ties:
        newest id), strictly after ``after``; ``steps`` as :meth:`get_workflow`'s (a
        listing shows only how many steps each declared)."""

    @abc.abstractmethod
    async def apply_workflow(self, change: WorkflowChange) -> Workflow | None:
        """Apply one conditional update of a record atomically; the record as updated, or
        None when it does not exist or an expectation does not hold."""

    @abc.abstractmethod
    async def workflow_steps(self, workflow_id: str, *, tenant: str | None = None) -> list[Job]:
        """Every job of the workflow (declared and spawned steps), oldest first; none for
        an unknown workflow or, when ``tenant`` is given, another tenant's."""

    @abc.abstractmethod
    async def any_job(self, query: JobQuery) -> bool:
        """Whether some job matches ``query`` (one indexed probe, for a query naming a
        ``workflow_id`` or ``spawned_by``)."""

    @abc.abstractmethod
    async def spawned_results(self, spawner: str) -> dict[str, Any]:
        """The result of each completed child ``spawner`` spawned, by its step name (what
        a step waiting for them sees in ``ctx.parents``): only those two fields read, not
        each child's job (a fan-in of thousands)."""

    @abc.abstractmethod
    async def release_spawned(self, spawner: str, now: datetime, limit: int) -> int:
        """Release up to ``limit`` of the waiting children ``spawner`` spawned (the caller
        has read ``spawner`` completed, their only parent): each written as
        :func:`~jobscheduler.domain.states.release_step` would write it, in one atomic
        statement where the store has one; how many were released (fewer than ``limit``:
        none is left waiting)."""

    @abc.abstractmethod
    async def clear_marks(self, steps: Sequence[Job]) -> int:
        """Clear the mark (``step_dirty``) of each of ``steps`` still marked at the status
        and version it was read with -- :func:`~jobscheduler.domain.states.settle_step` of
        each, in one write and without building a change for each where the store can;
        how many were cleared."""

    @abc.abstractmethod
    async def steps_to_settle(self, before: datetime, limit: int) -> list[Job]:
        """Steps marked ``step_dirty`` (:data:`STEPS_TO_SETTLE`) whose ``updated_at`` is
        older than ``before``, oldest first, at most ``limit`` (the reaper's sweep)."""

    @abc.abstractmethod
    async def expired_workflows(
        self, status: WorkflowStatus, before: datetime, limit: int, scope: TenantScope
    ) -> list[Workflow]:
        """Up to ``limit`` workflows in ``status`` (a final one) that finished before
        ``before``, of the tenants ``scope`` admits, oldest ``finished_at`` first, without
        their declared steps (the reaper's prune)."""

    @abc.abstractmethod
    async def delete_workflow_record(self, workflow: Workflow) -> bool:
        """Delete ``workflow``'s record if it still holds the status and ``finished_at`` it
        was read with (a retried workflow moved on and is kept); whether the record is gone
        (deleted now, or already: a repeated call is harmless). Its step jobs are the
        caller's to delete after (``delete_jobs``): once the record is gone, nothing can
        retry them."""
