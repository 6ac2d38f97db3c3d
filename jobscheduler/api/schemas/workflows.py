"""Declarations of the workflow routes: create (``POST /workflows``), read one, list, cancel
and retry, in the same terms as :mod:`.jobs`.

A create body is validated against :data:`CREATE_WORKFLOW` by the route table, then as a
whole by :func:`~jobscheduler.domain.workflows.parse_workflow_request` (unknown names, cycles,
each step's body as ``POST /jobs`` checks it); the step limit and the name rules come from
the domain, so the document and the checks cannot drift apart.
"""

from __future__ import annotations

from jobscheduler.api.route_table import Reply
from jobscheduler.api.shapes import (
    JOB_ID,
    NO_BODY,
    STATUS,
    TEXT,
    TIME,
    Schema,
    array_of,
    closed_object,
    nullable,
)
from jobscheduler.domain.keys import Role
from jobscheduler.domain.model import MAX_ATTEMPTS_LIMIT
from jobscheduler.domain.steps import MAX_STEPS, OnParentFailure
from jobscheduler.domain.workflows import LISTED, MAX_STEP_NAME, MAX_WORKFLOW_KEY
from jobscheduler.errors import (
    DuplicateJob,
    InvalidTransition,
    QuotaExceeded,
    WorkflowNotFound,
)

from ._common import (
    Operations,
    page_params,
    page_reply,
    path_param,
    query_param,
    reply_object,
    tenant_params,
)
from .jobs import PRIORITY

#: Most workflows one page of ``GET /workflows`` lists, and its default.
MAX_WORKFLOW_PAGE = 500
DEFAULT_WORKFLOW_PAGE = 50

WORKFLOW_ID: Schema = {**JOB_ID, "description": "the workflow's id"}
STEP_NAME: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_STEP_NAME,
    "pattern": "^[^/]+$",
    "description": "unique in its workflow; no '/'",
}
NAMES: Schema = array_of(STEP_NAME)

STEP_REQUEST: Schema = {
    "title": "Step request",
    **closed_object(
        required=["name", "jobType"],
        properties={
            "name": STEP_NAME,
            "jobType": TEXT,
            "payload": nullable({"type": "object"}),
            "priority": nullable(PRIORITY),
            "scheduledAt": nullable({**TIME, "description": "not before (default: now)"}),
            "maxAttempts": nullable({"type": "integer", "maximum": MAX_ATTEMPTS_LIMIT}),
            "dependsOn": nullable({**NAMES, "description": "steps it runs after (all completed)"}),
            "afterChildrenOf": nullable(
                {
                    **NAMES,
                    "description": "steps it runs after, and after every child they spawn",
                }
            ),
            "onParentFailure": nullable(
                {
                    "type": "string",
                    "enum": [v.value for v in OnParentFailure],
                    "description": "cancel (default): cancelled when a step it waits for fails; "
                    "run: runs once they have all ended (a clean-up step)",
                }
            ),
        },
    ),
}

CREATE_WORKFLOW: Schema = {
    "title": "Workflow request",
    **closed_object(
        required=["idempotencyKey", "steps"],
        properties={
            "idempotencyKey": {**TEXT, "maxLength": MAX_WORKFLOW_KEY},
            "tenantId": nullable(TEXT),
            "steps": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_STEPS,
                "items": STEP_REQUEST,
            },
        },
    ),
}

WORKFLOW_STATUS: Schema = {"type": "string", "enum": [s.value for s in LISTED]}

STEP: Schema = reply_object(
    title="Step",
    required=["name", "jobId", "jobType", "status", "dependsOn", "attempts"],
    properties={
        "name": {"type": "string"},
        "jobId": JOB_ID,
        "jobType": {"type": "string"},
        "status": STATUS,
        "dependsOn": array_of({"type": "string"}),
        "afterChildrenOf": array_of({"type": "string"}),
        "onParentFailure": {"type": "string"},
        "spawnedBy": {"type": "string", "description": "the step that spawned it"},
        "attempts": {"type": "integer", "minimum": 0},
        "lastError": {"type": "string"},
        "scheduledAt": TIME,
        "updatedAt": TIME,
    },
)

_WORKFLOW_FIELDS: dict[str, Schema] = {
    "id": WORKFLOW_ID,
    "tenantId": {"type": "string"},
    "idempotencyKey": {"type": "string"},
    "status": WORKFLOW_STATUS,
    "stepCount": {"type": "integer", "minimum": 1, "description": "steps declared"},
    "createdAt": TIME,
    "updatedAt": TIME,
    "finishedAt": TIME,
    "cancelRequestedAt": TIME,
    "templateId": {**JOB_ID, "description": "the cron template that spawned it"},
    "fireAt": TIME,
    "lastError": {"type": "string"},
}

WORKFLOW_SUMMARY: Schema = reply_object(
    title="Workflow summary",
    required=["id", "tenantId", "idempotencyKey", "status", "createdAt", "updatedAt"],
    properties=_WORKFLOW_FIELDS,
)

WORKFLOW: Schema = reply_object(
    title="Workflow",
    required=[*WORKFLOW_SUMMARY["required"], "steps", "counts"],
    properties={
        **_WORKFLOW_FIELDS,
        "steps": array_of(STEP),
        "counts": {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "description": "steps by status",
        },
    },
)

WORKFLOW_ID_PARAM = path_param("workflow_id", WORKFLOW_ID, "the workflow's id")

#: The workflow routes (``/workflows`` + ``path``).
workflows_operation = Operations(prefix="/workflows", tag="workflows")
#: An operation on one workflow (``/workflows/<workflow_id>`` + ``path``); an unknown
#: workflow is a 404.
workflow_operation = workflows_operation.item(WORKFLOW_ID_PARAM, WorkflowNotFound)


CREATE = workflows_operation(
    "create_workflow",
    "POST",
    "Create a workflow: named steps, each a job body plus the steps it waits for",
    role=Role.WRITER,
    unknown_params="ignore",
    body=CREATE_WORKFLOW,
    responses={201: Reply("the workflow, its roots pending, the others waiting", WORKFLOW)},
    errors={
        DuplicateJob: "the idempotencyKey names another workflow (workflowId), or a step's "
        "key is held by another job (jobId)",
        QuotaExceeded: "",
    },
)

GET = workflow_operation(
    "get_workflow",
    "GET",
    "A workflow with every step and its status",
    role=Role.READER,
    responses={200: Reply("the workflow", WORKFLOW)},
)

LIST = workflows_operation(
    "list_workflows",
    "GET",
    "A tenant's workflows, newest first, in pages",
    role=Role.READER,
    params=(
        *tenant_params("workflows", "workflow"),
        query_param(
            "status",
            {"oneOf": [WORKFLOW_STATUS, array_of(WORKFLOW_STATUS)]},
            "only these statuses (repeat, or comma-separated)",
        ),
        query_param("idempotencyKeyPrefix", TEXT, "keys starting with this text"),
        query_param("templateId", JOB_ID, "a template's runs"),
        *page_params(
            MAX_WORKFLOW_PAGE,
            size=f"page size (default {DEFAULT_WORKFLOW_PAGE})",
            cursor="the next page (from the Link header)",
        ),
    ),
    responses={
        200: page_reply("the workflows (a full page has a Link: rel=next header)", WORKFLOW_SUMMARY)
    },
)

CANCEL = workflow_operation(
    "cancel_workflow",
    "POST",
    "Cancel every unfinished step of a workflow (running ones get a cancel request)",
    role=Role.WRITER,
    path="/cancel",
    body=NO_BODY,
    body_required=False,
    responses={200: Reply("the workflow after the cancel", WORKFLOW)},
    errors={InvalidTransition: "the workflow completed or failed"},
)

RETRY = workflow_operation(
    "retry_workflow",
    "POST",
    "Resume a workflow: retry its failed or cancelled steps (or one, by name)",
    role=Role.WRITER,
    path="/retry",
    body=nullable(
        closed_object({"step": {**TEXT, "description": "only this step (and what it cancelled)"}})
    ),
    body_required=False,
    responses={200: Reply("the workflow, running again", WORKFLOW)},
    errors={InvalidTransition: "no step to retry"},
)

OPERATIONS = (CREATE, GET, LIST, CANCEL, RETRY)
