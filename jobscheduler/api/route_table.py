"""One route table: each route is declared once, and that declaration registers it, checks
what it is sent, says who may call it, and feeds the OpenAPI 3.1 document (``/openapi.json``).

An :class:`Operation` names the method, the path, the parameters, the request body's JSON
Schema, the role the caller needs, the replies it gives and the project exceptions it can
raise (their statuses, bodies and headers come from :mod:`.errors`, the one error table).
:meth:`RouteTable.route` registers the view and wraps it:

- a query parameter the operation does not declare is a 400 naming it (unless the operation
  says ``unknown_params="ignore"``, as the routes that always ignored them do);
- a body is read strictly: the content type is checked (415), the JSON parsed (400) and
  validated against the very schema the document publishes (see :mod:`.bodies`), then handed
  to the view as ``body``; validation.py's semantic checks follow in the view. A few older
  routes read and check their bodies themselves (``view_reads_body``), with messages that
  list the fields they accept; their schemas document those bodies and the fuzz test holds
  the two together.

The role is checked before the view runs: by the API's authentication step (:mod:`.hooks`),
which asks :meth:`RouteTable.access`, and again by the wrapper, right before the view, with
the principal the request then holds. The dashboard's HTML pages are declared with
:meth:`RouteTable.page`: their role the same way, but they stay out of the document.
:meth:`RouteTable.undeclared` lists any route on the app that was registered around the
table; a unit test keeps it empty.

Why not quart-schema: it derives schemas from pydantic/msgspec models and answers validation
failures in its own error shape. Our contract is the seed's ``{"error": "..."}`` with the
messages validation.py already gives, and our models are attrs classes that the stores use; a
second model layer per route would be the hand-kept copy this module exists to avoid.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import attrs
from quart import Blueprint, Response, request
from quart_trio import QuartTrio
from werkzeug.routing import Rule

from jobscheduler.domain.keys import Role
from jobscheduler.errors import JobSchedulerError, ValidationError

from .auth import current_principal
from .bodies import compile_body_validator, read_json_body
from .shapes import Schema as Schema

View = Callable[..., Awaitable[Response]]

#: The access of a route anyone may call without a key (health, the document, sign-in).
PUBLIC: Final = "public"
#: What a route needs: a role, or nothing at all (PUBLIC).
Access = Role | Literal["public"]


@attrs.frozen(kw_only=True)
class Param:
    """A path or query parameter."""

    name: str
    where: Literal["path", "query"]
    schema: Schema
    description: str
    required: bool = False


@attrs.frozen
class Reply:
    """One documented reply: its body schema (None: no JSON body) and headers."""

    description: str
    schema: Schema | None = None
    content_type: str = attrs.field(default="application/json", kw_only=True)
    #: Header name -> description (the value is a string).
    headers: Mapping[str, str] = attrs.field(factory=dict, kw_only=True)


@attrs.frozen(kw_only=True)
class Operation:
    """One route: who may call it, what it takes, and every answer it can give."""

    #: The operationId (also the client method's and the Quart endpoint's name).
    id: str
    method: Literal["GET", "POST", "PATCH", "PUT", "DELETE"]
    #: The Quart rule, e.g. ``/jobs/<job_id>`` (documented as ``/jobs/{job_id}``).
    rule: str
    summary: str
    tag: str
    #: The role the caller needs, or PUBLIC (no key; such routes never touch the store).
    role: Access
    params: tuple[Param, ...] = ()
    #: ``refuse``: a query parameter not in ``params`` is a 400; ``ignore``: it is ignored.
    unknown_params: Literal["refuse", "ignore"] = "refuse"
    #: The request body's JSON Schema; None for an operation without a body.
    body: Schema | None = None
    #: False: an empty body is allowed (and read as None).
    body_required: bool = True
    #: True: the view reads and checks the body itself (``body`` documents it).
    view_reads_body: bool = False
    #: Status -> reply, for the answers that are not errors.
    responses: Mapping[int, Reply]
    #: Exceptions the view raises on purpose -> why ("": the error table's reason). The
    #: ones every operation of its kind can give are added by :func:`.openapi.errors_of`.
    errors: Mapping[type[JobSchedulerError], str] = attrs.field(factory=dict)

    @property
    def public(self) -> bool:
        return self.role == PUBLIC

    @property
    def path(self) -> str:
        """The OpenAPI path template of the rule."""
        return _RULE_PARAM.sub(r"{\1}", self.rule)

    @property
    def query_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.where == "query")


_RULE_PARAM = re.compile(r"<(?:[a-z_]+:)?([A-Za-z_][A-Za-z0-9_]*)>")


def check_parameters(given: Iterable[str], accepted: Sequence[str]) -> None:
    """400 naming the query parameters that are not ``accepted`` (and those that are)."""
    unknown = sorted(set(given) - set(accepted))
    if unknown:
        raise ValidationError(
            f"unknown query parameter(s): {', '.join(u[:40] for u in unknown)} "
            f"(accepted: {', '.join(accepted)})"
        )


class RouteTable:
    """The declared routes of one app: registers them and answers who may call each."""

    def __init__(self, app: QuartTrio) -> None:
        self.app = app
        self.operations: dict[tuple[str, str], Operation] = {}
        #: Endpoint -> what it needs, for every declared route (operations and pages).
        self._access: dict[str, Access] = {}
        #: Endpoints of the dashboard's pages (declared, not documented).
        self._pages: set[str] = set()
        self._validators: dict[str, Callable[[Any], None]] = {}
        app.extensions["route_table"] = self

    # ---------------------------------------------------------------- registering

    def route(self, op: Operation, *, blueprint: Blueprint | None = None) -> Callable[[View], View]:
        """Register the decorated view for ``op`` (on ``blueprint`` when given: ``op.rule``
        is then the full path, under the blueprint's prefix). A view of an operation with a
        body the table reads receives it as ``body=``."""
        key = (op.method, op.rule)
        if key in self.operations:
            raise ValueError(f"operation {op.method} {op.rule} declared twice")
        validate = None
        if op.body is not None and not op.view_reads_body:
            validate = compile_body_validator(op.body)
            self._validators[op.id] = validate
        accepted = op.query_names if op.unknown_params == "refuse" else None
        role = op.role if isinstance(op.role, Role) else None

        def decorate(view: View) -> View:
            handler = view
            if validate is not None or accepted is not None or role is not None:

                @functools.wraps(view)
                async def checked(**kwargs: Any) -> Response:
                    if role is not None:
                        current_principal().require(role)
                    if accepted is not None and request.args:
                        check_parameters(request.args, accepted)
                    if validate is not None:
                        kwargs["body"] = await read_json_body(validate, required=op.body_required)
                    return await view(**kwargs)

                handler = checked
            rule = (
                op.rule if blueprint is None else op.rule.removeprefix(blueprint.url_prefix or "")
            )
            self._register(rule, op.id, handler, (op.method,), op.role, blueprint)
            self.operations[key] = op
            return view

        return decorate

    def page(
        self,
        rule: str,
        *,
        role: Access,
        methods: Sequence[str] = ("GET",),
        blueprint: Blueprint | None = None,
    ) -> Callable[[View], View]:
        """Register the decorated view as a dashboard page at ``rule`` (on ``blueprint``:
        relative to its prefix), declared with the role it needs, left out of the document."""

        def decorate(view: View) -> View:
            endpoint = self._register(rule, view.__name__, view, methods, role, blueprint)
            self._pages.add(endpoint)
            return view

        return decorate

    def _register(
        self,
        rule: str,
        name: str,
        view: View,
        methods: Sequence[str],
        role: Access,
        blueprint: Blueprint | None,
    ) -> str:
        if blueprint is None:
            self.app.add_url_rule(rule, name, view, methods=list(methods))
            endpoint = name
        else:
            blueprint.add_url_rule(rule, name, view, methods=list(methods))
            endpoint = f"{blueprint.name}.{name}"
        if self._access.setdefault(endpoint, role) != role:
            raise ValueError(f"endpoint {endpoint} declared with two roles")
        return endpoint

    # ---------------------------------------------------------------- reading

    def access(self, endpoint: str) -> Access | None:
        """What the route of ``endpoint`` needs (None: it was not declared)."""
        return self._access.get(endpoint)

    def validator(self, op: Operation) -> Callable[[Any], None]:
        """The compiled body validator of a routed operation (KeyError for one without)."""
        return self._validators[op.id]

    def api_rules(self) -> list[Rule]:
        """The app's URL rules that belong to the JSON API (every rule but the pages)."""
        return [r for r in self.app.url_map.iter_rules() if r.endpoint not in self._pages]

    def undeclared(self) -> list[str]:
        """``METHOD rule`` of every route on the app that was not declared here."""
        missing = []
        for rule in self.api_rules():
            for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
                if (method, rule.rule) not in self.operations:
                    missing.append(f"{method} {rule.rule}")
        return missing

    def registered(self) -> list[Operation]:
        """The declared operations, in path order."""
        return sorted(self.operations.values(), key=lambda op: (op.path, op.method))


def table_of(app: QuartTrio) -> RouteTable:
    """The route table of an app built by :func:`jobscheduler.api.create_app`."""
    table: RouteTable = app.extensions["route_table"]
    return table
