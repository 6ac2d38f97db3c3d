"""The client's types and limits: a job and a batch answer as the API shows them, the
keywords of listing and bulk actions, and the accepted sorts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict

#: Statuses a job never leaves (``wait`` returns on them).
FINAL_STATUSES = frozenset({"completed", "dlq", "cancelled", "failed"})


class Job(TypedDict, total=False):
    """A job as the API shows it (``GET /jobs/{id}``); optional fields may be absent."""

    id: str
    idempotencyKey: str
    tenantId: str
    jobType: str
    payload: dict[str, Any]
    priority: int
    status: str
    scheduledAt: str
    cron: str
    timezone: str
    claimedBy: str
    claimedAt: str
    attempts: int
    maxAttempts: int
    lastError: str
    result: Any
    templateId: str
    managedBy: str
    createdAt: str
    updatedAt: str


class Workflow(TypedDict, total=False):
    """A workflow as the API shows it (``GET /workflows/{id}``): ``steps`` (each with its
    ``name``, ``jobId``, ``status``, ``dependsOn``) and ``counts`` by status are in the
    answers about one workflow, not in a listing's."""

    id: str
    tenantId: str
    idempotencyKey: str
    status: str
    stepCount: int
    steps: list[dict[str, Any]]
    counts: dict[str, int]
    createdAt: str
    updatedAt: str
    finishedAt: str
    templateId: str


class BatchAnswer(TypedDict, total=False):
    """One answer of ``create_many``: status 201 with ``job``, 409 with ``jobId``, or 400."""

    status: int
    job: Job
    jobId: str
    error: str


Filter = dict[str, Any]
# Aliases for the clients' return types: inside a client class, ``list`` names the method.
Page = list[Job]
Answers = list[BatchAnswer]
Records = list[dict[str, Any]]


#: Accepted ``sort`` values of ``GET /jobs`` (the API's names): newest first (the default),
#: oldest first, soonest due first, latest due first.
SORTS = ("-createdAt", "createdAt", "scheduledAt", "-scheduledAt")
#: Most ids one bulk request may name (``filter.ids``).
MAX_BULK_IDS = 1000


class Selection(TypedDict, total=False):
    """The filter keywords shared by listing and bulk actions (Python names)."""

    status: str | Sequence[str] | None
    job_type: str | None
    template_id: str | None
    cron: bool | None
    created_after: datetime | str | None
    created_before: datetime | str | None
    #: Finished (completed, dlq, cancelled) before then.
    finished_before: datetime | str | None
    #: Exactly this idempotencyKey.
    idempotency_key: str | None
    #: Keys starting with this text (not with ``idempotency_key``).
    idempotency_key_prefix: str | None


class WorkflowListOptions(TypedDict, total=False):
    """The keywords of ``list_workflows``/``workflow_pages``."""

    #: running, completed, failed or cancelled (one, or several).
    status: str | Sequence[str] | None
    idempotency_key_prefix: str | None
    template_id: str | None
    page_size: int | None


class ListOptions(Selection, total=False):
    """The keywords of ``list``/``pages``: a :class:`Selection`, the order and page size."""

    #: True: every tenant's jobs (``allTenants=true``; an admin key of every tenant), instead
    #: of one tenant's.
    all_tenants: bool | None

    #: One of :data:`SORTS`; the API's default is ``-createdAt`` (newest first).
    sort: str | None
    page_size: int | None
    #: Start after the page this cursor ends (a :attr:`Paged.cursor` of the same listing).
    cursor: str | None
