"""The pieces the declarations of this package share: query and path parameters (a tenant,
a page, a limit), an answer's objects, a page's reply, and the operations of one part of the
API (``/flow/...``) or on one item of a collection (``/jobs/<job_id>/...``,
``/workflows/<workflow_id>/...``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import attrs

from jobscheduler.api.route_table import Access, Operation, Param, Reply
from jobscheduler.api.shapes import TEXT, Schema, array_of
from jobscheduler.errors import JobSchedulerError


def query_param(name: str, schema: Schema, description: str, *, required: bool = False) -> Param:
    """A query parameter (optional unless ``required``)."""
    return Param(
        name=name, where="query", schema=schema, description=description, required=required
    )


def path_param(name: str, schema: Schema, description: str) -> Param:
    """A path parameter (``<name>`` in the rule)."""
    return Param(name=name, where="path", schema=schema, description=description)


def limit_param(maximum: int | None, description: str) -> Param:
    """``limit``: how many items at most, from 1 (to ``maximum``, when there is one)."""
    schema: Schema = {"type": "integer", "minimum": 1}
    if maximum is not None:
        schema["maximum"] = maximum
    return query_param("limit", schema, description)


#: The tenant filter of the listings and figures that may span tenants.
TENANT_PARAM = query_param("tenantId", TEXT, "one tenant")


def tenant_params(items: str, item: str) -> tuple[Param, Param]:
    """``tenantId`` and ``allTenants`` of a listing of ``items`` (each an ``item``)."""
    return (
        attrs.evolve(
            TENANT_PARAM,
            description="the tenant: required, unless allTenants=true (a key bound to a tenant "
            "lists its own by default)",
        ),
        query_param(
            "allTenants",
            {"type": "boolean"},
            f"true: every tenant's {items}, instead of tenantId (admin keys of every "
            f"tenant only; each {item} names its tenantId)",
        ),
    )


def page_params(maximum: int, *, size: str, cursor: str) -> tuple[Param, Param]:
    """``limit`` (1..``maximum``) and the opaque ``cursor`` of a paged listing; ``size``
    and ``cursor`` describe them."""
    return (limit_param(maximum, size), query_param("cursor", {"type": "string"}, cursor))


def reply_object(
    *, title: str | None = None, required: Sequence[str] = (), properties: Mapping[str, Schema]
) -> Schema:
    """An object in an answer: these ``properties``, ``required`` the ones it always has. Unlike
    a request body (:func:`~jobscheduler.api.shapes.closed_object`) it stays open to new fields,
    so a field one change adds does not break a client."""
    out: Schema = {} if title is None else {"title": title}
    out["type"] = "object"
    if required:
        out["required"] = list(required)
    return {**out, "properties": dict(properties)}


def page_reply(description: str, items: Schema) -> Reply:
    """An answer that is one page of a listing: an array of ``items``, with a
    ``Link: rel="next"`` header unless it is the last page."""
    return Reply(
        description,
        array_of(items),
        headers={"Link": 'the next page: <url>; rel="next" (absent on the last page)'},
    )


@attrs.frozen(kw_only=True)
class Operations:
    """Declares the operations of one part of the API: each one's rule is ``prefix`` + its
    ``path``, its parameters ``params`` then its own, its errors ``errors`` then its own; it is
    listed under ``tag``, needs ``role`` and treats unknown query parameters as
    ``unknown_params`` says, unless it says otherwise (a part without a ``tag`` or a ``role``
    leaves them to each operation)."""

    prefix: str = ""
    tag: str | None = None
    role: Access | None = None
    params: tuple[Param, ...] = ()
    errors: Mapping[type[JobSchedulerError], str] = attrs.field(factory=dict)
    unknown_params: Literal["refuse", "ignore"] = "refuse"

    def below(self, id_param: Param) -> Operations:
        """The operations below ``prefix/<id>``: rule ``prefix/<id>`` + ``path``, the id
        (``id_param``) their first parameter after this part's."""
        return attrs.evolve(
            self, prefix=f"{self.prefix}/<{id_param.name}>", params=(*self.params, id_param)
        )

    def item(self, id_param: Param, missing: type[JobSchedulerError]) -> Operations:
        """The operations on one item of this collection (:meth:`below` its id); an unknown
        item, or another tenant's, is a 404 (``missing``). Unknown query parameters are ignored
        unless an operation says otherwise."""
        return attrs.evolve(
            self.below(id_param), errors={**self.errors, missing: ""}, unknown_params="ignore"
        )

    def __call__(
        self,
        id: str,
        method: Literal["GET", "POST", "PATCH", "PUT", "DELETE"],
        summary: str,
        *,
        tag: str | None = None,
        role: Access | None = None,
        path: str = "",
        params: tuple[Param, ...] = (),
        unknown_params: Literal["refuse", "ignore"] | None = None,
        body: Schema | None = None,
        body_required: bool = True,
        view_reads_body: bool = False,
        responses: Mapping[int, Reply],
        errors: Mapping[type[JobSchedulerError], str] | None = None,
    ) -> Operation:
        tag = tag or self.tag
        role = role or self.role
        if tag is None or role is None:
            raise TypeError(f"{id}: an operation needs a tag and a role")
        return Operation(
            id=id,
            method=method,
            rule=f"{self.prefix}{path}",
            summary=summary,
            tag=tag,
            role=role,
            params=(*self.params, *params),
            unknown_params=unknown_params or self.unknown_params,
            body=body,
            body_required=body_required,
            view_reads_body=view_reads_body,
            responses=responses,
            errors={**self.errors, **(errors or {})},
        )
