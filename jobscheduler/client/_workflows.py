"""The workflow operations of the API, once, as :mod:`._operations` holds the jobs': each a
function with the public method's parameters and docstring that builds the :class:`~._call.
Call` to send (or, for ``wait_workflow``, the :class:`WorkflowPoll`). Both clients bind
each of them as a method of the same name. No I/O happens here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Unpack, cast

import attrs
import httpx

from jobscheduler.errors import WorkflowNotFound

from ._call import Call, Paged, paged
from ._operations import Poll
from ._requests import given, job_id_of
from ._types import Job, Workflow, WorkflowListOptions


def _workflow_of(response: httpx.Response) -> Workflow:
    return cast(Workflow, response.json())


def _workflows_of(body: Any) -> list[Workflow]:
    return cast(list[Workflow], body)


def _path(workflow_id: str, action: str = "") -> str:
    return f"/workflows/{job_id_of(workflow_id)}{action}"


def create_workflow(
    steps: Sequence[Mapping[str, Any]], *, tenant_id: str, idempotency_key: str
) -> Call[Workflow]:
    """Create a workflow: ``steps`` are job bodies with a ``name`` and the names they wait
    for (``dependsOn``, ``afterChildrenOf``; ``onParentFailure``). DuplicateWorkflow (its
    ``existing_id``) when the key names another workflow; ValidationError names what is
    wrong with the steps (nothing is stored then)."""
    body = {"tenantId": tenant_id, "idempotencyKey": idempotency_key, "steps": list(steps)}
    return Call(
        "POST", "/workflows", _workflow_of, body=body, creates=True, missing=WorkflowNotFound
    )


def get_workflow(workflow_id: str) -> Call[Workflow]:
    """The workflow with every step and its status; WorkflowNotFound when there is none."""
    return Call("GET", _path(workflow_id), _workflow_of, missing=WorkflowNotFound)


def workflow_pages(
    tenant_id: str | None = None, **options: Unpack[WorkflowListOptions]
) -> Call[Paged[Workflow]]:
    """Pages of a tenant's workflows (without their steps), newest first, following the
    ``Link: rel="next"`` cursor; filters: ``status`` (running, completed, failed,
    cancelled), ``idempotency_key_prefix``, ``template_id``."""
    status = options.get("status")
    statuses = [status] if isinstance(status, str) else list(status or ())
    page_size = options.get("page_size")
    values = given(
        {
            "tenantId": tenant_id,
            "idempotencyKeyPrefix": options.get("idempotency_key_prefix"),
            "templateId": options.get("template_id"),
            "limit": None if page_size is None else str(page_size),
        }
    )
    params = [*values.items(), *(("status", s) for s in statuses)]
    return paged("/workflows", _workflows_of, params)


def list_workflows(
    tenant_id: str | None = None, **options: Unpack[WorkflowListOptions]
) -> Call[Paged[Workflow]]:
    """Every matching workflow (the keywords of :meth:`workflow_pages`), a page at a time."""
    return workflow_pages(tenant_id, **options)


def cancel_workflow(workflow_id: str) -> Call[Workflow]:
    """Cancel every unfinished step (a running one gets a cancel request); the workflow
    after it. InvalidTransition when it completed or failed."""
    return Call("POST", _path(workflow_id, "/cancel"), _workflow_of, missing=WorkflowNotFound)


def retry_workflow(workflow_id: str, *, step: str | None = None) -> Call[Workflow]:
    """Resume the workflow: its steps in dlq or cancelled (or only ``step``, with what it
    cancelled) wait for their parents again; what completed does not run again."""
    body = given({"step": step})
    return Call(
        "POST", _path(workflow_id, "/retry"), _workflow_of, body=body, missing=WorkflowNotFound
    )


@attrs.frozen(kw_only=True)
class WorkflowPoll(Poll):
    """What ``wait_workflow`` does: GET the workflow until it has ended."""

    what: ClassVar[str] = "workflow"

    @property
    def call(self) -> Call[Job]:
        return cast(Call[Job], get_workflow(self.job_id))


def wait_workflow(workflow_id: str, timeout: float = 60.0, *, interval: float = 0.5) -> Poll:
    """Poll until the workflow has ended (completed, failed, cancelled); WaitTimeout
    otherwise. Returns the workflow."""
    return WorkflowPoll(job_id=workflow_id, timeout=timeout, interval=interval)
