"""The workflow routes: ``POST /workflows``, ``GET /workflows[/{id}]``, and
``POST /workflows/{id}/cancel|retry`` (declared in :mod:`jobscheduler.api.schemas.workflows`).

A create is validated as a whole before any store call (a 400 stores nothing), charged to
the tenant's quotas as one create per step, and stored by
:func:`~jobscheduler.roles.workflows.create.create_workflow`; a key that names a stored
workflow is a 409 naming it (``workflowId``). Every route that names a workflow reads it in
the caller's tenant, so another tenant's workflow is a 404 exactly like a missing id. Each
action's store work is bounded by API_STORE_TIMEOUT like the job actions'.
"""

from __future__ import annotations

from typing import Any

from quart import Response, g, request

from jobscheduler.api.auth import current_principal
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.job_filters import decode_cursor, encode_cursor
from jobscheduler.api.replies import json_response, link_next_page
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.schemas import workflows as ops
from jobscheduler.api.tenancy import Tenancy, claim_tenant, listing_args
from jobscheduler.domain.model import is_job_id
from jobscheduler.domain.validation import parse_limit
from jobscheduler.domain.workflows import LISTED, Workflow, WorkflowStatus, workflow_to_json
from jobscheduler.errors import DuplicateJob, ValidationError, WorkflowNotFound
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.workflows import actions
from jobscheduler.roles.workflows.create import create_workflow, plan_of
from jobscheduler.store.workflows import WorkflowQuery, cursor_after


async def visible_workflow(deps: Deps, calls: BoundedCalls, raw_id: str) -> Workflow:
    """The workflow ``raw_id`` names, if the caller may see it: 400 for a malformed id, 404
    for an unknown one, another tenant's, and one still being stored."""
    workflow_id = raw_id.lower()
    if not is_job_id(workflow_id):
        raise ValidationError("id: must be a 24-character hex ObjectId")
    tenant = current_principal().tenant
    workflow = await calls.call(deps.store.get_workflow, workflow_id, tenant=tenant)
    if workflow.status is WorkflowStatus.CREATING:
        raise WorkflowNotFound(f"workflow {workflow_id} not found")
    return workflow


def parse_workflow_query(args: dict[str, str], statuses: list[str]) -> WorkflowQuery:
    """``GET /workflows``'s filters (400 for an unknown status)."""
    wanted: list[WorkflowStatus] = []
    for value in statuses:
        for name in filter(None, (part.strip() for part in value.split(","))):
            try:
                status = WorkflowStatus(name)
            except ValueError:
                status = None
            if status not in LISTED:
                accepted = ", ".join(s.value for s in LISTED)
                raise ValidationError(
                    f"status: unknown status {name[:40]!r} (accepted: {accepted})"
                )
            assert status is not None
            wanted.append(status)
    template = args.get("templateId")
    if template is not None and not is_job_id(template.lower()):
        raise ValidationError("templateId: must be a 24-character hex ObjectId")
    return WorkflowQuery(
        tenant_id=args.get("tenantId"),
        statuses=tuple(dict.fromkeys(wanted)) or LISTED,
        key_prefix=args.get("idempotencyKeyPrefix") or None,
        template_id=None if template is None else template.lower(),
    )


def register_workflow_routes(
    routes: RouteTable, deps: Deps, tenancy: Tenancy, calls: BoundedCalls
) -> None:
    """Add the workflow routes to ``routes``."""
    bounded = calls.call

    async def reply(workflow: Workflow, status: int = 200) -> Response:
        steps = await bounded(deps.store.workflow_steps, workflow.id)
        return json_response(workflow_to_json(workflow, steps), status)

    @routes.route(ops.CREATE)
    async def create_workflow_route(body: Any) -> Response:
        principal = current_principal()
        claim_tenant(body, principal)
        plan = plan_of(deps, body)
        tenant, count = plan.workflow.tenant_id, len(plan.jobs)
        await tenancy.admit_creates(principal, tenant, count)
        try:
            workflow, steps = await bounded(create_workflow, deps, plan, by="api")
        except DuplicateJob:
            tenancy.forget_creates(tenant, count)
            raise
        g.audit_detail = f"workflow {workflow.id}: {len(steps)} steps"
        return json_response(workflow_to_json(workflow, steps), 201)

    @routes.route(ops.GET)
    async def get_workflow(workflow_id: str) -> Response:
        return await reply(await visible_workflow(deps, calls, workflow_id))

    @routes.route(ops.LIST)
    async def list_workflows() -> Response:
        args = request.args
        values, every_tenant = listing_args(args)
        if not every_tenant:
            if values.get("tenantId") is None:
                raise ValidationError("tenantId is required (or allTenants=true)")
            current_principal().scope(values["tenantId"])
        query = parse_workflow_query(values, args.getlist("status"))
        limit = parse_limit(
            values.get("limit"), default=ops.DEFAULT_WORKFLOW_PAGE, maximum=ops.MAX_WORKFLOW_PAGE
        )
        cursor = decode_cursor(values["cursor"]) if values.get("cursor") else None
        found = await bounded(deps.store.find_workflows, query, limit, cursor, steps=False)
        response = json_response([workflow_to_json(w) for w in found], 200)
        if len(found) == limit:
            link_next_page(response, encode_cursor(cursor_after(found[-1])))
        return response

    @routes.route(ops.CANCEL)
    async def cancel_workflow(workflow_id: str, body: Any) -> Response:
        workflow = await visible_workflow(deps, calls, workflow_id)
        return await reply(await bounded(actions.cancel_workflow, deps, workflow, by="api"))

    @routes.route(ops.RETRY)
    async def retry_workflow(workflow_id: str, body: Any) -> Response:
        workflow = await visible_workflow(deps, calls, workflow_id)
        step_id = None
        if isinstance(body, dict) and body.get("step") is not None:
            declared = await bounded(deps.store.workflow_steps, workflow.id)
            named = [j for j in declared if j.step is not None and j.step.name == body["step"]]
            if not named:
                raise ValidationError(f"step: no step {str(body['step'])[:80]!r} in this workflow")
            step_id = named[0].id
        after = await bounded(actions.retry_workflow, deps, workflow, step_id=step_id, by="api")
        return await reply(after)
