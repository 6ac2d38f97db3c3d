"""The OpenAPI 3.1 document (``GET /openapi.json``), made from the route table's declarations
alone: each operation's parameters, body and replies, and its errors, whose statuses, bodies
and headers come from the one error table (:mod:`.errors`)."""

from __future__ import annotations

from typing import Any

from jobscheduler.errors import (
    BodyTooLarge,
    Forbidden,
    JobSchedulerError,
    StoreError,
    Unauthorized,
    UnsupportedMediaType,
    ValidationError,
)

from .errors import rule_of
from .route_table import Operation, Reply, RouteTable


def errors_of(op: Operation) -> dict[type[JobSchedulerError], str]:
    """The exceptions ``op`` can answer with: its own, and those of every operation of its
    kind (a key to check, parameters or a body to validate)."""
    out: dict[type[JobSchedulerError], str] = {}
    if not op.public:
        out |= {Unauthorized: "", Forbidden: "", StoreError: ""}
    if op.params or op.body is not None:
        out[ValidationError] = ""
    if op.body is not None:
        out[BodyTooLarge] = ""
        if not op.view_reads_body:
            out[UnsupportedMediaType] = ""
    out.update(op.errors)
    return out


def responses_of(op: Operation) -> dict[int, Reply]:
    """Every reply of ``op`` by status: its own, then one per status of its errors (the
    reasons joined, and the body schemas as alternatives when they differ)."""
    out = dict(op.responses)
    by_status: dict[int, list[tuple[type[JobSchedulerError], str]]] = {}
    for error, why in errors_of(op).items():
        rule = rule_of(error)
        if rule is None:
            raise ValueError(f"{op.id}: {error.__name__} has no rule in the error table")
        by_status.setdefault(rule.status, []).append((error, why or rule.reason))
    for status, errors in by_status.items():
        if status in out:
            raise ValueError(f"{op.id}: status {status} is both a reply and an error")
        rules = [rule_of(error) for error, _ in errors]
        schemas: list[dict[str, Any]] = []
        headers: dict[str, str] = {}
        for rule in rules:
            assert rule is not None
            if rule.schema not in schemas:
                schemas.append(rule.schema)
            headers |= {name: header.description for name, header in rule.headers.items()}
        reasons = list(dict.fromkeys(why for _, why in errors))
        out[status] = Reply(
            description="; ".join(reasons),
            schema=schemas[0] if len(schemas) == 1 else {"anyOf": schemas},
            headers=headers,
        )
    return dict(sorted(out.items()))


def _reply_json(reply: Reply) -> dict[str, Any]:
    out: dict[str, Any] = {"description": reply.description}
    if reply.schema is not None:
        out["content"] = {reply.content_type: {"schema": reply.schema}}
    if reply.headers:
        out["headers"] = {
            name: {"description": text, "schema": {"type": "string"}}
            for name, text in reply.headers.items()
        }
    return out


def _operation_json(op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operationId": op.id,
        "summary": op.summary,
        "tags": [op.tag],
        # The role a key needs (reader < writer < admin), or "public".
        "x-role": str(op.role),
    }
    if op.params:
        out["parameters"] = [
            {
                "name": p.name,
                "in": p.where,
                "required": p.required or p.where == "path",
                "description": p.description,
                "schema": p.schema,
            }
            for p in op.params
        ]
    if op.body is not None:
        out["requestBody"] = {
            "required": op.body_required,
            "content": {"application/json": {"schema": op.body}},
        }
    out["responses"] = {str(status): _reply_json(r) for status, r in responses_of(op).items()}
    # Keys are optional while authentication is off; with keys, a Bearer key is needed.
    out["security"] = [] if op.public else [{"bearerAuth": []}, {}]
    return out


def openapi_document(table: RouteTable, *, title: str, version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of every operation declared in ``table``."""
    paths: dict[str, dict[str, Any]] = {}
    for op in table.registered():
        paths.setdefault(op.path, {})[op.method.lower()] = _operation_json(op)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": version,
            "description": 'Every error is {"error": "..."} with the status listed.',
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "description": "an API key"}
            }
        },
    }
