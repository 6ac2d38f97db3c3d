"""Declarations of the tenancy routes (API keys, audit trail) and of a template's ledger
(``GET /jobs/{id}/occurrences``), in the same terms as :mod:`.jobs`. Like the management
routes, ``POST /keys`` reads and checks its body itself (``view_reads_body``)."""

from __future__ import annotations

from jobscheduler.api.route_table import Operation, Param, Reply
from jobscheduler.api.shapes import JOB_ID, TEXT, TIME, Schema
from jobscheduler.domain.keys import Role
from jobscheduler.errors import KeyNotFound

from .jobs import TENANT_PARAM, job_operation, page_params

#: Items of one page of a template's ledger: by default, and at most.
DEFAULT_OCCURRENCE_LIMIT = 50
MAX_OCCURRENCE_LIMIT = 500

ROLE: Schema = {"type": "string", "enum": ["reader", "writer", "admin"]}

KEY: Schema = {
    "title": "Key",
    "type": "object",
    "required": ["id", "role", "createdAt", "revoked"],
    "properties": {
        "id": {"type": "string"},
        "tenantId": {"type": ["string", "null"]},
        "allTenants": {"type": "boolean"},
        "role": ROLE,
        "name": {"type": "string"},
        "createdAt": TIME,
        "revoked": {"type": "boolean"},
        "revokedAt": TIME,
        "key": {"type": "string", "description": "the secret: shown once, at creation"},
    },
}

CREATE_KEY = Operation(
    id="create_key",
    method="POST",
    rule="/keys",
    summary="Create an API key (admin); the secret is in the answer only",
    tag="keys",
    role=Role.ADMIN,
    unknown_params="ignore",
    view_reads_body=True,
    body={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "tenantId": {"type": ["string", "null"]},
            "allTenants": {"type": "boolean"},
            "role": ROLE,
            "name": {"type": ["string", "null"]},
        },
    },
    responses={201: Reply(description="the key, with its secret", schema=KEY)},
)

LIST_KEYS = Operation(
    id="list_keys",
    method="GET",
    rule="/keys",
    summary="The keys (never their secrets)",
    tag="keys",
    role=Role.ADMIN,
    params=(TENANT_PARAM,),
    unknown_params="ignore",
    responses={200: Reply(description="the keys", schema={"type": "array", "items": KEY})},
)

REVOKE_KEY = Operation(
    id="revoke_key",
    method="DELETE",
    rule="/keys/<key_id>",
    summary="Revoke a key",
    tag="keys",
    role=Role.ADMIN,
    params=(Param(name="key_id", where="path", schema={"type": "string"}, description="the key"),),
    unknown_params="ignore",
    responses={200: Reply(description="the key, revoked", schema=KEY)},
    errors={KeyNotFound: ""},
)

#: Most tenants ``GET /tenants`` lists (its ``limit``: by default, and at most).
MAX_TENANTS = 1000

TENANTS = Operation(
    id="tenants",
    method="GET",
    rule="/tenants",
    summary="The tenants that hold jobs, in order (admin; a key bound to a tenant sees its own)",
    tag="keys",
    role=Role.ADMIN,
    params=(
        Param(
            name="limit",
            where="query",
            schema={"type": "integer", "minimum": 1, "maximum": MAX_TENANTS},
            description=f"at most this many (default and maximum {MAX_TENANTS})",
        ),
    ),
    responses={
        200: Reply(
            description="the tenants",
            schema={
                "type": "object",
                "required": ["tenants", "truncated"],
                "properties": {
                    "tenants": {"type": "array", "items": {"type": "string"}},
                    "truncated": {
                        "type": "boolean",
                        "description": "true: more tenants hold jobs than were listed",
                    },
                },
            },
        )
    },
)

AUDIT_RECORD: Schema = {
    "title": "Audit record",
    "type": "object",
    "required": ["id", "at", "action"],
    "properties": {
        "id": {"type": "string"},
        "at": TIME,
        "keyId": {"type": ["string", "null"]},
        "tenantId": {"type": ["string", "null"]},
        "action": {"type": "string"},
        "jobId": {"type": ["string", "null"]},
        "status": {"type": ["integer", "null"]},
        "detail": {"type": ["string", "null"]},
    },
}

AUDIT = Operation(
    id="audit",
    method="GET",
    rule="/audit",
    summary="The audit trail, newest first (admin)",
    tag="keys",
    role=Role.ADMIN,
    params=(
        TENANT_PARAM,
        Param(name="keyId", where="query", schema=TEXT, description="one key"),
        Param(name="action", where="query", schema=TEXT, description="one action"),
        Param(name="jobId", where="query", schema=JOB_ID, description="one job"),
        Param(name="since", where="query", schema=TIME, description="at or after"),
        Param(name="until", where="query", schema=TIME, description="before"),
        Param(name="before", where="query", schema=JOB_ID, description="cursor: nextBefore"),
        Param(
            name="limit",
            where="query",
            schema={"type": "integer", "minimum": 1},
            description="page size",
        ),
    ),
    responses={
        200: Reply(
            description="one page of records",
            schema={
                "type": "object",
                "required": ["records"],
                "properties": {
                    "records": {"type": "array", "items": AUDIT_RECORD},
                    "nextBefore": {"type": ["string", "null"]},
                },
            },
        )
    },
)

OCCURRENCE: Schema = {
    "title": "Occurrence",
    "type": "object",
    "required": ["fireAt", "status"],
    "properties": {
        "fireAt": TIME,
        "fireAtLocal": {"type": "string"},
        "status": {"type": "string"},
        "reason": {"type": "string"},
        "runId": JOB_ID,
        "spawnedAt": TIME,
        "lateSeconds": {"type": "number"},
        "run": {"type": ["object", "null"]},
    },
}

OCCURRENCES = job_operation(
    "occurrences",
    "GET",
    "A cron template's ledger of fire times, newest first",
    tag="cron",
    role=Role.READER,
    path="/occurrences",
    params=page_params(
        MAX_OCCURRENCE_LIMIT,
        size=f"page size (default {DEFAULT_OCCURRENCE_LIMIT})",
        cursor="opaque: nextCursor of the previous page",
    ),
    responses={
        200: Reply(
            description="one page of the ledger",
            schema={
                "type": "object",
                "required": ["id", "occurrences"],
                "properties": {
                    "id": JOB_ID,
                    "occurrences": {"type": "array", "items": OCCURRENCE},
                    "nextCursor": {"type": "string"},
                },
            },
            headers={"Link": 'the next page: <url>; rel="next"'},
        )
    },
)
