"""Declarations of the retention routes: the rules the reaper prunes by, and a tenant's
override set by an admin (``GET /retention``, ``PUT|DELETE /retention/{tenant_id}``)."""

from __future__ import annotations

from jobscheduler.api.route_table import Reply
from jobscheduler.api.shapes import TIME, Schema, array_of, closed_object
from jobscheduler.domain.keys import Role
from jobscheduler.domain.retention import PRUNABLE

from ._common import Operations, path_param, reply_object
from .jobs import DURATION

#: Status -> duration, for the statuses that are pruned.
KEEP: Schema = {
    **closed_object({status.value: DURATION for status in PRUNABLE}),
    "description": 'how long finished jobs are kept, per status (e.g. {"completed": "7d"})',
}

OVERRIDE: Schema = reply_object(
    title="RetentionOverride",
    required=["scope", "name", "retention", "updatedAt"],
    properties={
        "scope": {"type": "string", "enum": ["tenant", "jobType"]},
        "name": {"type": "string"},
        "retention": KEEP,
        "updatedAt": TIME,
    },
)

RULES: Schema = reply_object(
    title="Retention",
    required=["defaults", "overrides"],
    properties={
        "defaults": KEEP,
        "overrides": array_of(OVERRIDE),
        "lastPrune": {"type": ["object", "null"]},
    },
)

TENANT_PATH = path_param("tenant_id", {"type": "string"}, "the tenant")

#: The retention routes: for admins.
retention_operation = Operations(prefix="/retention", tag="retention", role=Role.ADMIN)
#: An operation on one tenant's override (``/retention/<tenant_id>``).
tenant_retention_operation = retention_operation.below(TENANT_PATH)

GET_RETENTION = retention_operation(
    "get_retention",
    "GET",
    "The retention the reaper prunes by: defaults, job types' and tenants' overrides",
    responses={200: Reply("the rules and the last prune sweep", RULES)},
)

SET_RETENTION = tenant_retention_operation(
    "set_retention",
    "PUT",
    "Set a tenant's retention override (statuses not named keep the other rules)",
    body=KEEP,
    responses={200: Reply("the override as stored", OVERRIDE)},
)

CLEAR_RETENTION = tenant_retention_operation(
    "clear_retention",
    "DELETE",
    "Delete a tenant's retention override",
    responses={200: Reply("the rules, without the override", RULES)},
)
