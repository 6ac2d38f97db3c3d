"""Declarations of the flow-control routes: the limits of each job type (the handlers' and
an admin's per-tenant overrides), the tenants' weights, and what the leader holds back."""

from __future__ import annotations

from jobscheduler.api.route_table import Reply
from jobscheduler.api.shapes import TEXT, TIME, Schema, array_of, closed_object
from jobscheduler.domain.flow import MAX_SLOTS, MAX_WEIGHT
from jobscheduler.domain.keys import Role
from jobscheduler.errors import Forbidden

from ._common import TENANT_PARAM, Operations, limit_param, path_param, reply_object

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

OVERRIDE: Schema = reply_object(
    required=["tenantId", "jobType", "limits", "effective"],
    properties={
        "tenantId": {"type": "string"},
        "jobType": {"type": "string"},
        "limits": LIMITS,
        "effective": {**LIMITS, "description": "the override over the handler's limits"},
    },
)

WEIGHT: Schema = reply_object(
    required=["tenantId", "weight"],
    properties={
        "tenantId": {"type": "string"},
        "weight": {"type": "integer", "minimum": 1, "maximum": MAX_WEIGHT},
    },
)

HOLD: Schema = reply_object(
    required=["reason", "jobType", "text", "waiting"],
    properties={
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
)

JOB_TYPE_PARAM = path_param("job_type", TEXT, "a job type")
TENANT_PATH = path_param("tenant_id", TEXT, "a tenant")

#: The flow-control routes (``/flow`` + ``path``): for admins, unless one says otherwise.
flow_operation = Operations(prefix="/flow", tag="flow", role=Role.ADMIN)

LIMITS_LIST = flow_operation(
    "flow_limits",
    "GET",
    "The job types' limits and the tenants' overrides (a tenant's admin: its own)",
    path="/limits",
    params=(TENANT_PARAM,),
    responses={
        200: Reply(
            "the handlers' limits by job type, and the overrides",
            reply_object(
                required=["defaults", "overrides"],
                properties={
                    "defaults": {"type": "object", "additionalProperties": LIMITS},
                    "overrides": array_of(OVERRIDE),
                },
            ),
        )
    },
)

PUT_LIMITS = flow_operation(
    "put_flow_limits",
    "PUT",
    "Override a job type's limits in one tenant (every field null: back to the handler's)",
    path="/limits/<job_type>",
    params=(JOB_TYPE_PARAM, TENANT_PARAM),
    body=LIMITS_BODY,
    responses={200: Reply("the override as stored", OVERRIDE)},
)

WEIGHTS = flow_operation(
    "flow_weights",
    "GET",
    "The tenants' weights in fair claims (a tenant not listed weighs 1)",
    path="/weights",
    responses={
        200: Reply(
            "the weights",
            reply_object(required=["weights"], properties={"weights": array_of(WEIGHT)}),
        )
    },
)

PUT_WEIGHT = flow_operation(
    "put_flow_weight",
    "PUT",
    "Set a tenant's weight (an admin of every tenant)",
    path="/weights/<tenant_id>",
    params=(TENANT_PATH,),
    body=closed_object(required=["weight"], properties={"weight": WEIGHT["properties"]["weight"]}),
    responses={200: Reply("the weight as stored", WEIGHT)},
    errors={Forbidden: "a key bound to a tenant cannot change the shares of the tenants"},
)

HELD = flow_operation(
    "flow_held",
    "GET",
    "What the leader's latest claims held back, busiest first (the caller's tenant)",
    path="/held",
    role=Role.READER,
    params=(
        TENANT_PARAM,
        limit_param(100, "most holds listed (10)"),
    ),
    responses={
        200: Reply(
            "the leader's report",
            reply_object(
                required=["holds"],
                properties={
                    "at": {**TIME, "description": "when the leader wrote it"},
                    "holds": array_of(HOLD),
                },
            ),
        )
    },
)

OPERATIONS = (LIMITS_LIST, PUT_LIMITS, WEIGHTS, PUT_WEIGHT, HELD)
