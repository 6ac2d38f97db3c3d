"""Admin routes of tenancy: API keys, the tenants and the audit trail.

- ``POST /keys`` ``{tenantId | allTenants: true, role, name}`` -> 201 with the key (shown once);
- ``GET /keys[?tenantId=]`` -> the keys (never their secrets);
- ``DELETE /keys/{id}`` -> the key, revoked (404 for an unknown id or another tenant's key);
- ``GET /tenants[?limit=]`` -> ``{"tenants": [...], "truncated": bool}``, the tenants that hold
  jobs (the dashboard's tenant picker);
- ``GET /audit?tenantId&keyId&action&jobId&since&until&before&limit`` -> newest first,
  ``{"records": [...], "nextBefore": id | null}``.

An admin key bound to a tenant manages only that tenant's keys and reads only its records;
only an all-tenant admin creates all-tenant keys.
"""

from __future__ import annotations

import logging

import attrs
from quart import Response, g, request

from jobscheduler.api.auth import current_principal
from jobscheduler.api.bodies import any_json_body, json_object
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.schemas import admin as ops
from jobscheduler.api.tenancy import Tenancy
from jobscheduler.domain.audit import audit_to_json, parse_audit_query
from jobscheduler.domain.keys import (
    check_name,
    check_tenant,
    is_key_id,
    key_to_json,
    new_key,
    parse_role,
)
from jobscheduler.errors import Forbidden, KeyNotFound, ValidationError

log = logging.getLogger(__name__)


def parse_tenants_limit(raw: str | None) -> int:
    """``GET /tenants``'s ``limit``: 1 to MAX_TENANTS (the default); 400 otherwise."""
    if raw is None:
        return ops.MAX_TENANTS
    if not raw.isdigit() or not 1 <= int(raw) <= ops.MAX_TENANTS:
        raise ValidationError(f"limit: must be an integer from 1 to {ops.MAX_TENANTS}")
    return int(raw)


#: The fields of ``POST /keys``, as its declaration's schema names them.
KEY_FIELDS = frozenset((ops.CREATE_KEY.body or {})["properties"])


def register_tenancy_routes(routes: RouteTable, tenancy: Tenancy) -> None:
    """Add the key and audit routes to ``routes``."""
    deps = tenancy.deps

    @routes.route(ops.CREATE_KEY)
    async def create_key() -> Response:
        principal = current_principal()
        body = json_object(await any_json_body(), KEY_FIELDS)
        all_tenants = body.get("allTenants", False)
        if not isinstance(all_tenants, bool):
            raise ValidationError("allTenants: must be true or false")
        tenant: str | None
        if all_tenants:
            if body.get("tenantId") is not None:
                raise ValidationError("give either tenantId or allTenants, not both")
            if principal.tenant is not None:
                raise Forbidden("only an admin of every tenant may create all-tenant keys")
            tenant = None
        else:
            raw_tenant = body.get("tenantId", principal.tenant)
            if raw_tenant is None:
                raise ValidationError("tenantId is required (or allTenants: true)")
            tenant = check_tenant(raw_tenant)
            principal.scope(tenant)
        role = parse_role(body.get("role"))
        name = check_name(body.get("name"))
        record, token = new_key(tenant=tenant, role=role, name=name, now=deps.clock.now())
        await tenancy.call(deps.store.insert_key, record)
        tenancy.authenticator.forget(record.id)
        g.audit_detail = f"key {record.id} created ({role.value})"
        log.info(
            "api key created",
            extra={"key": record.id, "tenant": tenant, "role": role.value, "by": principal.key_id},
        )
        return json_response({**key_to_json(record), "key": token}, 201)

    @routes.route(ops.LIST_KEYS)
    async def list_keys() -> Response:
        principal = current_principal()
        requested = request.args.get("tenantId") or None
        tenant = principal.scope(requested)
        keys = await tenancy.call(deps.store.list_keys, tenant)
        return json_response([key_to_json(k) for k in keys], 200)

    @routes.route(ops.REVOKE_KEY)
    async def revoke_key(key_id: str) -> Response:
        principal = current_principal()
        if not is_key_id(key_id):
            raise KeyNotFound(f"key {key_id[:64]} not found")
        key = await tenancy.call(deps.store.get_key, key_id, tenant=principal.tenant)
        if key is None:  # another tenant's key is None too, as a missing one
            raise KeyNotFound(f"key {key_id} not found")
        revoked = await tenancy.call(deps.store.revoke_key, key_id, deps.clock.now())
        tenancy.authenticator.forget(key_id)
        if revoked is None:
            raise KeyNotFound(f"key {key_id} not found")
        g.audit_detail = f"key {key_id} revoked"
        log.info(
            "api key revoked",
            extra={"key": key_id, "tenant": revoked.tenant, "by": principal.key_id},
        )
        return json_response(key_to_json(revoked), 200)

    @routes.route(ops.TENANTS)
    async def list_tenants() -> Response:
        principal = current_principal()
        limit = parse_tenants_limit(request.args.get("limit"))
        if principal.tenant is not None:
            # A tenant's admin: its own tenant, whether or not it holds jobs yet.
            tenants, truncated = [principal.tenant], False
        else:
            found = await tenancy.call(deps.store.tenants, limit + 1)
            tenants, truncated = found[:limit], len(found) > limit
        return json_response({"tenants": tenants, "truncated": truncated}, 200)

    @routes.route(ops.AUDIT)
    async def read_audit() -> Response:
        principal = current_principal()
        query = parse_audit_query(request.args)
        scoped = principal.scope(query.tenant)
        if scoped != query.tenant:
            query = attrs.evolve(query, tenant=scoped)
        records = await tenancy.call(deps.store.list_audit, query)
        next_before = records[-1].id if len(records) == query.limit else None
        return json_response(
            {"records": [audit_to_json(r) for r in records], "nextBefore": next_before}, 200
        )
