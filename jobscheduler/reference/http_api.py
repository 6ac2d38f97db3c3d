"""The HTTP API's reference page: the document the app serves at ``/openapi.json``, rendered
to Markdown here (no widget, no CDN: the site builds and reads offline).

Each operation gets its method and path, summary, the role it needs, its parameters, its
body's fields, its answers, and the Python client's method of the same name with what it
returns (its docstring's first sentence).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import trio

from jobscheduler.api import create_app
from jobscheduler.client import Client
from jobscheduler.config import Settings
from jobscheduler.handlers import default_registry
from jobscheduler.process.assembly import embedded_deps

from ._markdown import cell, first_sentence, page_top, table

#: Sections in this order (an operation's first tag); any other tag comes after them.
TAGS = {
    "jobs": "Jobs",
    "actions": "Acting on jobs",
    "cron": "Cron templates",
    "stats": "Statistics",
    "keys": "Keys, tenants and the audit trail",
    "health": "Health and the document",
}
METHOD_ORDER = ("get", "post", "patch", "put", "delete")
Schema = Mapping[str, Any]


@functools.cache
def openapi_document() -> dict[str, Any]:
    """What ``GET /openapi.json`` answers on an app with the built-in job types (no server,
    no store: the app is asked in-process; once per process)."""
    settings = attrs.evolve(Settings(), sqlite_path=":memory:", auth="required")
    app = create_app(embedded_deps(settings, default_registry(settings)))

    async def fetch() -> dict[str, Any]:
        async with app.test_app() as served:
            response = await served.test_client().get("/openapi.json")
            document: dict[str, Any] = await response.get_json()
            return document

    return trio.run(fetch)


def render(document: Mapping[str, Any] | None = None) -> str:
    """The page (of ``document``, by default the app's own)."""
    document = document if document is not None else openapi_document()
    info = document["info"]
    lines = [
        *page_top("HTTP API", "the app's `/openapi.json`"),
        f"{info['title']} {info['version']}. {info.get('description', '')}",
        "",
        "With `AUTH=required` every operation but those marked *public* needs an API key, "
        "sent as `Authorization: Bearer <key>`; the role an operation needs is named with it "
        "(`reader` < `writer` < `admin`). The document itself is served at `GET "
        "/openapi.json`.",
        "",
    ]
    operations = list(_operations(document))
    for tag in _tag_order(op["tags"][0] for _, _, op in operations):
        lines += [f"## {TAGS.get(tag, tag.capitalize())}", ""]
        for path, method, op in operations:
            if op["tags"][0] == tag:
                lines += _operation(path, method, op)
    shapes = _titled(document)
    if shapes:
        lines += ["## Shapes", "", "The objects the answers above are made of.", ""]
        for title, schema in sorted(shapes.items()):
            lines += [f"### {title}", "", *_fields(schema, expand_titled=True)]
    return "\n".join(lines).rstrip() + "\n"


def _titled(node: Any, found: dict[str, Schema] | None = None) -> dict[str, Schema]:
    """Every schema in the document that has a ``title``, by title."""
    found = {} if found is None else found
    if isinstance(node, Mapping):
        if isinstance(node.get("title"), str) and "properties" in node:
            found.setdefault(node["title"], node)
        for value in node.values():
            _titled(value, found)
    elif isinstance(node, list):
        for value in node:
            _titled(value, found)
    return found


def _anchor(title: str) -> str:
    return "-".join(title.lower().split())


def _operations(document: Mapping[str, Any]) -> Iterable[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method in sorted(item, key=METHOD_ORDER.index):
            yield path, method, item[method]


def _tag_order(tags: Iterable[str]) -> list[str]:
    seen = list(dict.fromkeys(tags))
    return [t for t in TAGS if t in seen] + [t for t in seen if t not in TAGS]


def _operation(path: str, method: str, op: Mapping[str, Any]) -> list[str]:
    role = op.get("x-role", "public")
    who = "public: no key" if role == "public" else f"role: `{role}`"
    lines = [
        f"### `{method.upper()} {path}`",
        "",
        f"{op['summary']}. *{who}; operation `{op['operationId']}`.*",
        "",
    ]
    params = op.get("parameters", [])
    if params:
        lines += [
            "**Parameters**",
            "",
            *table(
                ("name", "in", "type", "description"),
                [
                    (
                        f"`{p['name']}`" + (" (required)" if p.get("required") else ""),
                        p["in"],
                        type_of(p.get("schema", {})),
                        p.get("description", ""),
                    )
                    for p in params
                ],
            ),
            "",
        ]
    body = op.get("requestBody")
    if body:
        schema = body["content"]["application/json"]["schema"]
        optional = "" if body.get("required") else " (optional)"
        lines += [f"**Body**{optional}: {type_of(schema)}", ""]
        lines += _fields(schema)
    lines += ["**Answers**", ""]
    rows = []
    for status, reply in op["responses"].items():
        schema = _body_schema(reply)
        answer = type_of(schema) if schema and not status.startswith(("4", "5")) else ""
        headers = ", ".join(f"`{h}`" for h in reply.get("headers", {}))
        rows.append((status, reply["description"], answer, headers))
    lines += [*table(("status", "when", "body", "headers"), rows), ""]
    for status, reply in op["responses"].items():
        schema = _body_schema(reply)
        if status.startswith("2") and schema:
            fields = _fields(schema)
            if fields:
                lines += [f"Fields of the `{status}` answer:", "", *fields]
    lines += _client(op["operationId"])
    return lines


def _body_schema(reply: Mapping[str, Any]) -> Schema | None:
    """The JSON schema of a reply's body (None: no body)."""
    for media in reply.get("content", {}).values():
        schema: Schema | None = media.get("schema")
        return schema
    return None


def _client(operation_id: str) -> list[str]:
    """The Python client's method of this operation, and what it returns."""
    method = getattr(Client, operation_id, None)
    if method is None or not callable(method):
        return []
    return [f"*Python:* `Client.{operation_id}()` — {first_sentence(method.__doc__)}", ""]


def _fields(
    schema: Schema, prefix: str = "", depth: int = 0, *, expand_titled: bool = False
) -> list[str]:
    """A table of an object's fields (nested objects' fields as ``a.b``, one level down);
    a titled shape is not expanded but named (its fields are under "Shapes")."""
    if schema.get("type") == "array":
        schema = schema.get("items", {})
        prefix = f"{prefix}[]." if prefix else "[]."
    if "title" in schema and not expand_titled:
        return []
    properties: Schema = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", []))
    rows = []
    for name, field in properties.items():
        label = f"`{prefix}{name}`" + (" (required)" if name in required else "")
        rows.append((label, type_of(field), field.get("description", "")))
    lines = table(("field", "type", "description"), rows)
    if depth == 0:
        for name, field in properties.items():
            nested = field.get("items", field) if field.get("type") == "array" else field
            if isinstance(nested, Mapping) and nested.get("properties") and "title" not in nested:
                inner = f"{prefix}{name}[]." if field.get("type") == "array" else f"{name}."
                lines += ["", *_fields(nested, inner, depth + 1)]
    return [*lines, ""]


def type_of(schema: Schema | None) -> str:
    """A schema in a few words: ``string (date-time)``, ``array of object``, ``1 to 1000``."""
    if not schema:
        return ""
    if isinstance(schema.get("title"), str) and "properties" in schema:
        return f"[{schema['title']}](#{_anchor(schema['title'])})"
    if "enum" in schema:
        values = [json.dumps(v) for v in schema["enum"] if v is not None]
        shown = ", ".join(values[:8]) + (", …" if len(values) > 8 else "")
        return cell(f"one of {shown}")
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return " or ".join(dict.fromkeys(type_of(s) for s in schema[key]))
    kind = schema.get("type", "object" if "properties" in schema else "any")
    kinds = [k for k in (kind if isinstance(kind, list) else [kind]) if k != "null"] or ["null"]
    words = []
    for name in kinds:
        if name == "array":
            words.append(f"array of {type_of(schema.get('items')) or 'any'}")
        elif name == "string" and "format" in schema:
            words.append(f"string ({schema['format']})")
        elif name in ("integer", "number") and ("minimum" in schema or "maximum" in schema):
            low, high = schema.get("minimum", ""), schema.get("maximum", "")
            words.append(f"{name} ({low}…{high})" if high != "" else f"{name} (≥ {low})")
        else:
            words.append(str(name))
    text = " or ".join(words)
    nullable = isinstance(kind, list) and "null" in kind
    return f"{text} or null" if nullable else text
