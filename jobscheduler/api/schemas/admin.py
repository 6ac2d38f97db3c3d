"""Declarations of the tenancy routes (API keys, audit trail) and of a template's ledger
(``GET /jobs/{id}/occurrences``), in the same terms as :mod:`.jobs`. Like the management
routes, ``POST /keys`` reads and checks its body itself (``view_reads_body``)."""

from __future__ import annotations

import attrs

from jobscheduler.api.route_table import Reply
from jobscheduler.api.shapes import JOB_ID, TEXT, TIME, Schema, array_of, closed_object
from jobscheduler.domain.keys import Role
from jobscheduler.errors import KeyNotFound

from ._common import (
    TENANT_PARAM,
    Operations,
    limit_param,
    page_params,
    path_param,
    query_param,
    reply_object,
)
from .jobs import job_operation

#: Items of one page of a template's ledger: by default, and at most.
DEFAULT_OCCURRENCE_LIMIT = 50
MAX_OCCURRENCE_LIMIT = 500

ROLE: Schema = {"type": "string", "enum": ["reader", "writer", "admin"]}

KEY: Schema = reply_object(
    title="Key",
    required=["id", "role", "createdAt", "revoked"],
    properties={
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
)

#: The tenancy routes: for admins.
tenancy_operation = Operations(tag="keys", role=Role.ADMIN)
#: The key routes (``/keys`` + ``path``); unknown query parameters are ignored.
keys_operation = attrs.evolve(tenancy_operation, prefix="/keys", unknown_params="ignore")

CREATE_KEY = keys_operation(
    "create_key",
    "POST",
    "Create an API key (admin); the secret is in the answer only",
    view_reads_body=True,
    body=closed_object(
        {
            "tenantId": {"type": ["string", "null"]},
            "allTenants": {"type": "boolean"},
            "role": ROLE,
            "name": {"type": ["string", "null"]},
        }
    ),
    responses={201: Reply("the key, with its secret", KEY)},
)

LIST_KEYS = keys_operation(
    "list_keys",
    "GET",
    "The keys (never their secrets)",
    params=(TENANT_PARAM,),
    responses={200: Reply("the keys", array_of(KEY))},
)

KEY_ID = path_param("key_id", {"type": "string"}, "the key")
#: An operation on one key (``/keys/<key_id>`` + ``path``); an unknown key is a 404.
key_operation = keys_operation.item(KEY_ID, KeyNotFound)

REVOKE_KEY = key_operation(
    "revoke_key",
    "DELETE",
    "Revoke a key",
    responses={200: Reply("the key, revoked", KEY)},
)

#: Most tenants ``GET /tenants`` lists (its ``limit``: by default, and at most).
MAX_TENANTS = 1000

TENANTS = tenancy_operation(
    "tenants",
    "GET",
    "The tenants that hold jobs, in order (admin; a key bound to a tenant sees its own)",
    path="/tenants",
    params=(limit_param(MAX_TENANTS, f"at most this many (default and maximum {MAX_TENANTS})"),),
    responses={
        200: Reply(
            "the tenants",
            reply_object(
                required=["tenants", "truncated"],
                properties={
                    "tenants": array_of({"type": "string"}),
                    "truncated": {
                        "type": "boolean",
                        "description": "true: more tenants hold jobs than were listed",
                    },
                },
            ),
        )
    },
)

AUDIT_RECORD: Schema = reply_object(
    title="Audit record",
    required=["id", "at", "action"],
    properties={
        "id": {"type": "string"},
        "at": TIME,
        "keyId": {"type": ["string", "null"]},
        "tenantId": {"type": ["string", "null"]},
        "action": {"type": "string"},
        "jobId": {"type": ["string", "null"]},
        "status": {"type": ["integer", "null"]},
        "detail": {"type": ["string", "null"]},
    },
)

AUDIT = tenancy_operation(
    "audit",
    "GET",
    "The audit trail, newest first (admin)",
    path="/audit",
    params=(
        TENANT_PARAM,
        query_param("keyId", TEXT, "one key"),
        query_param("action", TEXT, "one action"),
        query_param("jobId", JOB_ID, "one job"),
        query_param("since", TIME, "at or after"),
        query_param("until", TIME, "before"),
        query_param("before", JOB_ID, "cursor: nextBefore"),
        limit_param(None, "page size"),
    ),
    responses={
        200: Reply(
            "one page of records",
            reply_object(
                required=["records"],
                properties={
                    "records": array_of(AUDIT_RECORD),
                    "nextBefore": {"type": ["string", "null"]},
                },
            ),
        )
    },
)

OCCURRENCE: Schema = reply_object(
    title="Occurrence",
    required=["fireAt", "status"],
    properties={
        "fireAt": TIME,
        "fireAtLocal": {"type": "string"},
        "status": {"type": "string"},
        "reason": {"type": "string"},
        "runId": JOB_ID,
        "spawnedAt": TIME,
        "lateSeconds": {"type": "number"},
        "run": {"type": ["object", "null"]},
    },
)

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
            "one page of the ledger",
            reply_object(
                required=["id", "occurrences"],
                properties={
                    "id": JOB_ID,
                    "occurrences": array_of(OCCURRENCE),
                    "nextCursor": {"type": "string"},
                },
            ),
            headers={"Link": 'the next page: <url>; rel="next"'},
        )
    },
)
