"""JSON Schemas of the values the HTTP contract is made of (times, ids, statuses, text) and of
its error bodies; :mod:`.errors` and the declarations in :mod:`.schemas` build on them.

Limits and enums come from model.py, so a new status or a changed limit shows up in
validation and in ``/openapi.json`` at once.
"""

from __future__ import annotations

from typing import Any

from jobscheduler.domain.model import MAX_STRING_LENGTH, Status

Schema = dict[str, Any]

TIME: Schema = {"type": "string", "format": "date-time"}
JOB_ID: Schema = {"type": "string", "pattern": "^[0-9a-fA-F]{24}$"}
STATUS: Schema = {"type": "string", "enum": [s.value for s in Status]}
TEXT: Schema = {"type": "string", "minLength": 1, "maxLength": MAX_STRING_LENGTH}


def nullable(schema: Schema) -> Schema:
    """Optional request fields may be given as null, meaning "not given"."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    if "enum" in schema:
        return {**schema, "enum": [*schema["enum"], None]}
    return schema


#: The body of every error response.
ERROR: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "minLength": 1}},
}

#: A 409 naming the job that holds an idempotencyKey (or a template's fire time).
DUPLICATE: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string"},
        "jobId": {**JOB_ID, "description": "the job that holds the idempotencyKey"},
    },
}

#: A 409 naming the workflow that holds an idempotencyKey.
DUPLICATE_WORKFLOW: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string"},
        "workflowId": {**JOB_ID, "description": "the workflow that holds the idempotencyKey"},
    },
}

#: A 409 naming the job whose status forbids an action, and that status.
CONFLICT: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string"},
        "jobId": JOB_ID,
        "status": {**STATUS, "description": "the job's status, which forbids the action"},
    },
}
