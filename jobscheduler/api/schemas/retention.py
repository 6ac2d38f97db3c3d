"""Declarations of the retention routes: the rules the reaper prunes by, and a tenant's
override set by an admin (``GET /retention``, ``PUT|DELETE /retention/{tenant_id}``)."""

from __future__ import annotations

from jobscheduler.api.route_table import Operation, Param, Reply
from jobscheduler.api.shapes import TIME, Schema
from jobscheduler.domain.keys import Role
from jobscheduler.domain.retention import PRUNABLE

from .jobs import DURATION

#: Status -> duration, for the statuses that are pruned.
KEEP: Schema = {
    "type": "object",
    "additionalProperties": False,
    "properties": {status.value: DURATION for status in PRUNABLE},
    "description": 'how long finished jobs are kept, per status (e.g. {"completed": "7d"})',
}

OVERRIDE: Schema = {
    "title": "RetentionOverride",
    "type": "object",
    "required": ["scope", "name", "retention", "updatedAt"],
    "properties": {
        "scope": {"type": "string", "enum": ["tenant", "jobType"]},
        "name": {"type": "string"},
        "retention": KEEP,
        "updatedAt": TIME,
    },
}

RULES: Schema = {
    "title": "Retention",
    "type": "object",
    "required": ["defaults", "overrides"],
    "properties": {
        "defaults": KEEP,
        "overrides": {"type": "array", "items": OVERRIDE},
        "lastPrune": {"type": ["object", "null"]},
    },
}

TENANT_PATH = Param(
    name="tenant_id", where="path", schema={"type": "string"}, description="the tenant"
)

GET_RETENTION = Operation(
    id="get_retention",
    method="GET",
    rule="/retention",
    summary="The retention the reaper prunes by: defaults, job types' and tenants' overrides",
    tag="retention",
    role=Role.ADMIN,
    responses={200: Reply(description="the rules and the last prune sweep", schema=RULES)},
)

SET_RETENTION = Operation(
    id="set_retention",
    method="PUT",
    rule="/retention/<tenant_id>",
    summary="Set a tenant's retention override (statuses not named keep the other rules)",
    tag="retention",
    role=Role.ADMIN,
    params=(TENANT_PATH,),
    body=KEEP,
    responses={200: Reply(description="the override as stored", schema=OVERRIDE)},
)

CLEAR_RETENTION = Operation(
    id="clear_retention",
    method="DELETE",
    rule="/retention/<tenant_id>",
    summary="Delete a tenant's retention override",
    tag="retention",
    role=Role.ADMIN,
    params=(TENANT_PATH,),
    responses={200: Reply(description="the rules, without the override", schema=RULES)},
)
