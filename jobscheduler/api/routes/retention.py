"""Admin routes of retention (declared in :mod:`jobscheduler.api.schemas.retention`):

- ``GET /retention`` -> ``{"defaults", "overrides", "lastPrune"}``: what the reaper prunes by
  (an admin bound to a tenant sees the job types' overrides and its own tenant's);
- ``PUT /retention/{tenant_id}`` ``{"completed": "1d", "dlq": "90d"}`` -> the override as
  stored (``{}`` deletes it); a tenant's override wins over a job type's and the defaults;
- ``DELETE /retention/{tenant_id}`` -> the rules without it.
"""

from __future__ import annotations

import logging
from typing import Any

from quart import Response, g

from jobscheduler.api.auth import current_principal
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.schemas import retention as ops
from jobscheduler.domain.keys import check_tenant
from jobscheduler.domain.retention import Override, Scope, format_keep, parse_keep
from jobscheduler.errors import ValidationError
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.retention import default_keep

log = logging.getLogger(__name__)


def register_retention_routes(routes: RouteTable, deps: Deps, calls: BoundedCalls) -> None:
    """Add the retention routes to ``routes``."""

    async def rules_json(tenant: str | None) -> dict[str, Any]:
        overrides = await calls.call(deps.store.retention_overrides)
        last = await calls.call(deps.store.last_prune)
        mine = [
            o for o in overrides if tenant is None or o.scope is Scope.JOB_TYPE or o.name == tenant
        ]
        return {
            "defaults": format_keep(default_keep(deps.settings)),
            "overrides": [o.to_json() for o in mine],
            "lastPrune": None if last is None else last.to_json(),
        }

    @routes.route(ops.GET_RETENTION)
    async def get_retention() -> Response:
        return json_response(await rules_json(current_principal().tenant), 200)

    @routes.route(ops.SET_RETENTION)
    async def set_retention(tenant_id: str, body: Any) -> Response:
        principal = current_principal()
        tenant = principal.scope(check_tenant(tenant_id))
        assert tenant is not None
        try:
            keep = parse_keep(body)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None
        override = Override(scope=Scope.TENANT, name=tenant, keep=keep, updated_at=deps.clock.now())
        await calls.call(deps.store.set_retention, override)
        g.audit_detail = f"retention of {tenant} set to {format_keep(keep) or 'the defaults'}"
        log.info("retention override set", extra={"tenant": tenant, "by": principal.key_id})
        return json_response(override.to_json(), 200)

    @routes.route(ops.CLEAR_RETENTION)
    async def clear_retention(tenant_id: str) -> Response:
        principal = current_principal()
        tenant = principal.scope(check_tenant(tenant_id))
        assert tenant is not None
        cleared = Override(scope=Scope.TENANT, name=tenant, keep={}, updated_at=deps.clock.now())
        await calls.call(deps.store.set_retention, cleared)
        g.audit_detail = f"retention override of {tenant} deleted"
        return json_response(await rules_json(principal.tenant), 200)
