"""One route table: each HTTP operation is declared once, and that declaration both registers
the route and feeds the OpenAPI 3.1 document (``GET /openapi.json``).

An :class:`Operation` names the method, the path, the parameters, the request body's JSON
Schema and every response (the ``{"error"}`` bodies and headers such as ``Link`` and
``Retry-After`` included). :meth:`RouteTable.route` registers the view on the app and, when the
operation has a body, wraps it: the content type is checked (415), the body parsed strictly
(400), validated against the very schema the document publishes (a ``fastjsonschema``
validator compiled once per operation, errors worded like :mod:`jobscheduler.domain.validation`'s)
and handed to the view as ``body``; validation.py's semantic checks (job types, cron expressions,
zones, payload validators) follow in the view. So the document cannot drift from what the
handlers accept. :meth:`RouteTable.undeclared` lists any route registered on the app without
a declaration; a unit test keeps it empty.

Why not quart-schema: it derives schemas from pydantic/msgspec models and answers validation
failures in its own error shape. Our contract is the seed's ``{"error": "..."}`` with the
messages validation.py already gives, and our models are attrs classes that the stores use; a
second model layer per route would be the hand-kept copy this module exists to avoid.
fastjsonschema (draft-07 subset, which is also valid 2020-12 as OpenAPI 3.1 reads it) costs
a few microseconds per create body — see the README's figure — where ``jsonschema`` costs
tens.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

import attrs
from quart import Response
from quart_trio import QuartTrio
from werkzeug.routing import Rule

from .bodies import Schema as Schema
from .bodies import compile_body_validator, read_json_body

View = Callable[..., Awaitable[Response]]

#: The body of every error response.
ERROR_SCHEMA: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "minLength": 1}},
}

#: Why each status is answered; every operation documents the ones it can give.
ERROR_REASONS: dict[int, str] = {
    400: "the request is invalid (the message says which field and why)",
    401: "no valid API key",
    403: "the key may not do this, or names another tenant",
    404: "no such job (or one of another tenant)",
    405: "method not allowed",
    409: "conflict with the job's current state",
    413: "request body larger than 1 MiB",
    415: "Content-Type must be application/json",
    429: "too many requests; retry after Retry-After seconds",
    503: "the job store is unavailable; retry after Retry-After seconds",
}


@attrs.frozen(kw_only=True)
class Param:
    """A path or query parameter."""

    name: str
    where: Literal["path", "query"]
    schema: Schema
    description: str
    required: bool = False


@attrs.frozen(kw_only=True)
class Reply:
    """One documented response: its body schema (None: no JSON body) and headers."""

    description: str
    schema: Schema | None = None
    content_type: str = "application/json"
    #: Header name -> description (the value is a string).
    headers: Mapping[str, str] = attrs.field(factory=dict)


def error_reply(status: int, description: str | None = None, **headers: str) -> Reply:
    return Reply(
        description=description or ERROR_REASONS[status], schema=ERROR_SCHEMA, headers=headers
    )


@attrs.frozen(kw_only=True)
class Operation:
    """One route: what it takes and every answer it can give."""

    #: The operationId (also the client method's and the Quart endpoint's name).
    id: str
    method: Literal["GET", "POST", "PATCH", "PUT", "DELETE"]
    #: The Quart rule, e.g. ``/jobs/<job_id>`` (documented as ``/jobs/{job_id}``).
    rule: str
    summary: str
    tag: str
    params: tuple[Param, ...] = ()
    #: The request body's JSON Schema; None for an operation without a body.
    body: Schema | None = None
    #: False: an empty body is allowed (and read as None).
    body_required: bool = True
    #: Status -> reply; the standard errors (auth, store, body) are added by :func:`responses_of`.
    responses: Mapping[int, Reply]
    #: Public operations (health, the document itself) need no key and never touch the store.
    public: bool = False

    @property
    def path(self) -> str:
        """The OpenAPI path template of the rule."""
        return _RULE_PARAM.sub(r"{\1}", self.rule)


_RULE_PARAM = re.compile(r"<(?:[a-z_]+:)?([A-Za-z_][A-Za-z0-9_]*)>")


def responses_of(op: Operation) -> dict[int, Reply]:
    """The operation's own replies plus the errors every operation of its kind can give."""
    out = dict(op.responses)
    if not op.public:
        out.setdefault(401, error_reply(401))
        out.setdefault(403, error_reply(403))
        out.setdefault(503, error_reply(503, **{"Retry-After": "seconds to wait"}))
    if op.params or op.body is not None:
        out.setdefault(400, error_reply(400))
    if any(p.where == "path" for p in op.params):
        out.setdefault(404, error_reply(404))
    if op.body is not None:
        out.setdefault(413, error_reply(413))
        out.setdefault(415, error_reply(415))
    return dict(sorted(out.items()))


# ------------------------------------------------------------------ the table


class RouteTable:
    """The declared operations of one app; registers routes and renders the document."""

    def __init__(self, app: QuartTrio) -> None:
        self.app = app
        self.operations: dict[tuple[str, str], Operation] = {}
        self._validators: dict[str, Callable[[Any], None]] = {}
        #: Endpoints (or blueprint names, as ``"name."``) that serve pages, not the JSON API.
        self._pages: set[str] = set()
        app.extensions["route_table"] = self

    def pages(self, *endpoints: str) -> None:
        """Mark endpoints as pages outside the JSON API (the dashboard): they are neither
        declared nor documented. ``"ui."`` covers every endpoint of the ``ui`` blueprint."""
        self._pages.update(endpoints)

    def api_rules(self) -> list[Rule]:
        """The app's URL rules that belong to the JSON API (every rule but the pages)."""
        return [rule for rule in self.app.url_map.iter_rules() if not self._is_page(rule.endpoint)]

    def _is_page(self, endpoint: str) -> bool:
        return endpoint in self._pages or any(
            endpoint.startswith(p) for p in self._pages if p.endswith(".")
        )

    def route(self, op: Operation) -> Callable[[View], View]:
        """Register ``view`` for ``op``; a body operation's view receives ``body=``."""
        validate = compile_body_validator(op.body) if op.body is not None else None
        if validate is not None:
            self._validators[op.id] = validate

        def decorate(view: View) -> View:
            handler = view
            if validate is not None:

                @functools.wraps(view)
                async def with_body(**kwargs: Any) -> Response:
                    body = await read_json_body(validate, required=op.body_required)
                    return await view(body=body, **kwargs)

                handler = with_body
            self.app.add_url_rule(op.rule, op.id, handler, methods=[op.method])
            self._remember(op)
            return view

        return decorate

    def validator(self, op: Operation) -> Callable[[Any], None]:
        """The compiled body validator of a routed operation (KeyError for one without)."""
        return self._validators[op.id]

    def describe(self, *ops: Operation) -> None:
        """Declare routes another module registered itself (documentation only: prefer
        :meth:`route`, which also validates the body with the published schema)."""
        for op in ops:
            self._remember(op)

    def _remember(self, op: Operation) -> None:
        key = (op.method, op.rule)
        if key in self.operations:
            raise ValueError(f"operation {op.method} {op.rule} declared twice")
        self.operations[key] = op

    def undeclared(self) -> list[str]:
        """``METHOD rule`` of every route on the app that has no declaration."""
        missing = []
        for rule in self.api_rules():
            for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
                if (method, rule.rule) not in self.operations:
                    missing.append(f"{method} {rule.rule}")
        return missing

    def registered(self) -> Iterable[Operation]:
        """The declared operations whose route exists on the app, in path order."""
        present = {
            (method, rule.rule)
            for rule in self.app.url_map.iter_rules()
            for method in rule.methods or ()
        }
        ops = [op for key, op in self.operations.items() if key in present]
        return sorted(ops, key=lambda op: (op.path, op.method))


def table_of(app: QuartTrio) -> RouteTable:
    table: RouteTable = app.extensions["route_table"]
    return table


# ------------------------------------------------------------------ the document


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
    out: dict[str, Any] = {"operationId": op.id, "summary": op.summary, "tags": [op.tag]}
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
    """The OpenAPI 3.1 document of every declared operation registered on the app."""
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
