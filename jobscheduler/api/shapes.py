"""JSON Schemas of the values the HTTP contract is made of (times, ids, statuses, text) and of
its error bodies; :mod:`.errors` and the declarations in :mod:`.schemas` build on them.

Limits and enums come from model.py, so a new status or a changed limit shows up in
validation and in ``/openapi.json`` at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def array_of(items: Schema) -> Schema:
    """An array of ``items``."""
    return {"type": "array", "items": items}


def closed_object(properties: Mapping[str, Schema], *, required: Sequence[str] = ()) -> Schema:
    """An object of these ``properties`` and no others (a request body: a misspelt field is a
    400, not ignored); ``required`` are the ones it must have."""
    out: Schema = {"type": "object"}
    if required:
        out["required"] = list(required)
    return {**out, "additionalProperties": False, "properties": dict(properties)}


#: The body of an action that takes none: nothing, ``null`` or ``{}``.
NO_BODY: Schema = {"type": ["object", "null"], "additionalProperties": False}


def error_naming(**fields: Schema) -> Schema:
    """The body of an error that names what it is about (``fields``) beside the message."""
    return {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string"}, **fields},
    }


#: The body of every error response.
ERROR: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "minLength": 1}},
}

#: A 409 naming the job that holds an idempotencyKey (or a template's fire time).
DUPLICATE: Schema = error_naming(
    jobId={**JOB_ID, "description": "the job that holds the idempotencyKey"}
)

#: A 409 naming the workflow that holds an idempotencyKey.
DUPLICATE_WORKFLOW: Schema = error_naming(
    workflowId={**JOB_ID, "description": "the workflow that holds the idempotencyKey"}
)

#: A 409 naming the job whose status forbids an action, and that status.
CONFLICT: Schema = error_naming(
    jobId=JOB_ID, status={**STATUS, "description": "the job's status, which forbids the action"}
)
