"""Admin routes of tenancy: API keys and the audit trail.

- ``POST /keys`` ``{tenantId | allTenants: true, role, name}`` -> 201 with the key (shown once);
- ``GET /keys[?tenantId=]`` -> the keys (never their secrets);
- ``DELETE /keys/{id}`` -> the key, revoked (404 for an unknown id or another tenant's key);
- ``GET /audit?tenantId&keyId&action&jobId&since&until&before&limit`` -> newest first,
  ``{"records": [...], "nextBefore": id | null}``.

An admin key bound to a tenant manages only that tenant's keys and reads only its records;
only an all-tenant admin creates all-tenant keys.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
from quart import Response, g, request
from quart_trio import QuartTrio

from jobscheduler.api.auth import current_principal, requires
from jobscheduler.domain.audit import audit_to_json, parse_audit_query
from jobscheduler.domain.keys import (
    Role,
    check_name,
    check_tenant,
    is_key_id,
    key_to_json,
    new_key,
    parse_role,
)
from jobscheduler.domain.validation import loads_json_body
from jobscheduler.errors import Forbidden, ValidationError
from jobscheduler.roles.deps import Deps

log = logging.getLogger(__name__)

KEY_FIELDS = frozenset({"tenantId", "allTenants", "role", "name"})


def register_tenancy_routes(
    app: QuartTrio, deps: Deps, json_response: Callable[..., Response]
) -> None:
    from jobscheduler.api.tenancy import current_tenancy

    def not_found(key_id: str) -> Response:
        return json_response({"error": f"key {key_id} not found"}, 404)

    @app.post("/keys")
    @requires(Role.ADMIN)
    async def create_key() -> Response:
        principal = current_principal()
        raw = await request.get_data(cache=False)
        body = loads_json_body(raw.encode() if isinstance(raw, str) else raw)
        if not isinstance(body, dict):
            raise ValidationError("request body must be a JSON object")
        unknown = sorted(set(body) - KEY_FIELDS)
        if unknown:
            raise ValidationError(f"unknown field(s): {', '.join(unknown)}")
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
        await current_tenancy().call(deps.store.insert_key, record)
        current_tenancy().authenticator.forget(record.id)
        g.audit_detail = f"key {record.id} created ({role.value})"
        log.info(
            "api key created",
            extra={"key": record.id, "tenant": tenant, "role": role.value, "by": principal.key_id},
        )
        return json_response({**key_to_json(record), "key": token}, 201)

    @app.get("/keys")
    @requires(Role.ADMIN)
    async def list_keys() -> Response:
        principal = current_principal()
        requested = request.args.get("tenantId") or None
        tenant = principal.scope(requested)
        keys = await current_tenancy().call(deps.store.list_keys, tenant)
        return json_response([key_to_json(k) for k in keys], 200)

    @app.delete("/keys/<key_id>")
    @requires(Role.ADMIN)
    async def revoke_key(key_id: str) -> Response:
        principal = current_principal()
        if not is_key_id(key_id):
            return not_found(key_id[:64])
        key = await current_tenancy().call(deps.store.get_key, key_id)
        if key is None or not (principal.tenant is None or key.tenant == principal.tenant):
            return not_found(key_id)
        revoked = await current_tenancy().call(deps.store.revoke_key, key_id, deps.clock.now())
        current_tenancy().authenticator.forget(key_id)
        if revoked is None:
            return not_found(key_id)
        g.audit_detail = f"key {key_id} revoked"
        log.info(
            "api key revoked",
            extra={"key": key_id, "tenant": revoked.tenant, "by": principal.key_id},
        )
        return json_response(key_to_json(revoked), 200)

    @app.get("/audit")
    @requires(Role.ADMIN)
    async def read_audit() -> Response:
        principal = current_principal()
        query = parse_audit_query(request.args)
        scoped = principal.scope(query.tenant)
        if scoped != query.tenant:
            query = attrs.evolve(query, tenant=scoped)
        records = await current_tenancy().call(deps.store.list_audit, query)
        next_before = records[-1].id if len(records) == query.limit else None
        return json_response(
            {"records": [audit_to_json(r) for r in records], "nextBefore": next_before}, 200
        )
