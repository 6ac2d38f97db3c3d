"""Declarations of the flow-control routes: the limits of each job type (the handlers' and
an admin's per-tenant overrides), the tenants' weights, and what the leader holds back."""

from __future__ import annotations

from jobscheduler.api.route_table import Operation, Reply
from jobscheduler.api.shapes import TEXT, TIME, Schema, array_of, closed_object
from jobscheduler.domain.flow import MAX_SLOTS, MAX_WEIGHT
from jobscheduler.domain.keys import Role
from jobscheduler.errors import Forbidden

from ._common import TENANT_PARAM, limit_param, path_param

RATE: Schema = {"type": "string", "description": "starts per period: 100/s, 10/m, 5/10s"}
SLOTS: Schema = {"type": "integer", "minimum": 1, "maximum": MAX_SLOTS}

LIMITS: Schema = {
    "title": "Limits",
    **closed_object(
        {
            "concurrency": {**SLOTS, "description": "jobs at once per concurrencyKey"},
            "maxRunning": {**SLOTS, "description": "jobs of the type at once in the tenant"},
            "rateLimit": {**RATE, "description": "starts of the type in the tenant"},
            "keyRateLimit": {**RATE, "description": "starts per concurrencyKey"},
            "burst": {**SLOTS, "description": "starts a rate lets through at once"},
        }
    ),
}

#: The body of ``PUT /flow/limits/{jobType}``: every field nullable (null, or left out:
#: the handler's).
LIMITS_BODY: Schema = {
    **LIMITS,
    "properties": {
        name: {**schema, "type": [schema["type"], "null"]}
        for name, schema in LIMITS["properties"].items()
    },
}

OVERRIDE: Schema = {
    "type": "object",
    "required": ["tenantId", "jobType", "limits", "effective"],
    "properties": {
        "tenantId": {"type": "string"},
        "jobType": {"type": "string"},
        "limits": LIMITS,
        "effective": {**LIMITS, "description": "the override over the handler's limits"},
    },
}

WEIGHT: Schema = {
    "type": "object",
    "required": ["tenantId", "weight"],
    "properties": {
        "tenantId": {"type": "string"},
        "weight": {"type": "integer", "minimum": 1, "maximum": MAX_WEIGHT},
    },
}

HOLD: Schema = {
    "type": "object",
    "required": ["reason", "jobType", "text", "waiting"],
    "properties": {
        "reason": {
            "type": "string",
            "enum": ["concurrency", "max_running", "rate_limit", "key_rate_limit", "capacity"],
        },
        "tenantId": {"type": "string"},
        "jobType": {"type": "string"},
        "key": {"type": "string"},
        "text": {"type": "string"},
        "waiting": {"type": "integer", "description": "due jobs held (a lower bound)"},
    },
}

JOB_TYPE_PARAM = path_param("job_type", TEXT, "a job type")
TENANT_PATH = path_param("tenant_id", TEXT, "a tenant")

LIMITS_LIST = Operation(
    id="flow_limits",
    method="GET",
    rule="/flow/limits",
    summary="The job types' limits and the tenants' overrides (a tenant's admin: its own)",
    tag="flow",
    role=Role.ADMIN,
    params=(TENANT_PARAM,),
    responses={
        200: Reply(
            "the handlers' limits by job type, and the overrides",
            {
                "type": "object",
                "required": ["defaults", "overrides"],
                "properties": {
                    "defaults": {"type": "object", "additionalProperties": LIMITS},
                    "overrides": array_of(OVERRIDE),
                },
            },
        )
    },
)

PUT_LIMITS = Operation(
    id="put_flow_limits",
    method="PUT",
    rule="/flow/limits/<job_type>",
    summary="Override a job type's limits in one tenant (every field null: back to the handler's)",
    tag="flow",
    role=Role.ADMIN,
    params=(JOB_TYPE_PARAM, TENANT_PARAM),
    body=LIMITS_BODY,
    responses={200: Reply("the override as stored", OVERRIDE)},
)

WEIGHTS = Operation(
    id="flow_weights",
    method="GET",
    rule="/flow/weights",
    summary="The tenants' weights in fair claims (a tenant not listed weighs 1)",
    tag="flow",
    role=Role.ADMIN,
    responses={
        200: Reply(
            "the weights",
            {
                "type": "object",
                "required": ["weights"],
                "properties": {"weights": array_of(WEIGHT)},
            },
        )
    },
)

PUT_WEIGHT = Operation(
    id="put_flow_weight",
    method="PUT",
    rule="/flow/weights/<tenant_id>",
    summary="Set a tenant's weight (an admin of every tenant)",
    tag="flow",
    role=Role.ADMIN,
    params=(TENANT_PATH,),
    body=closed_object(required=["weight"], properties={"weight": WEIGHT["properties"]["weight"]}),
    responses={200: Reply("the weight as stored", WEIGHT)},
    errors={Forbidden: "a key bound to a tenant cannot change the shares of the tenants"},
)

HELD = Operation(
    id="flow_held",
    method="GET",
    rule="/flow/held",
    summary="What the leader's latest claims held back, busiest first (the caller's tenant)",
    tag="flow",
    role=Role.READER,
    params=(
        TENANT_PARAM,
        limit_param(100, "most holds listed (10)"),
    ),
    responses={
        200: Reply(
            "the leader's report",
            {
                "type": "object",
                "required": ["holds"],
                "properties": {
                    "at": {**TIME, "description": "when the leader wrote it"},
                    "holds": array_of(HOLD),
                },
            },
        )
    },
)

OPERATIONS = (LIMITS_LIST, PUT_LIMITS, WEIGHTS, PUT_WEIGHT, HELD)
