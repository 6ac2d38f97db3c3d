"""The flow-control routes (declared in :mod:`jobscheduler.api.schemas.flow`):

- ``GET /flow/limits[?tenantId=]`` -> the handlers' limits by job type and the overrides;
- ``PUT /flow/limits/{jobType}[?tenantId=]`` -> override a type's limits in one tenant;
- ``GET /flow/weights``, ``PUT /flow/weights/{tenantId}`` -> the tenants' shares;
- ``GET /flow/held[?tenantId=&limit=]`` -> what the leader holds back, busiest first.

A tenant's admin reads and overrides its own tenant's limits; only an admin of every tenant
changes weights (a tenant raising its own share would take it from the others). The
scheduler reads overrides and weights from the store within a second.
"""

from __future__ import annotations

import logging
from typing import Any

from quart import Response, g, request

from jobscheduler.api.auth import current_principal
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.schemas import flow as ops
from jobscheduler.domain.flow import (
    LimitOverride,
    Limits,
    TenantWeight,
    busiest_to_json,
    check_weight,
    scopes_of,
)
from jobscheduler.domain.keys import check_tenant
from jobscheduler.domain.model import Job, Status
from jobscheduler.errors import Forbidden, ValidationError
from jobscheduler.roles.deps import Deps

log = logging.getLogger(__name__)


def override_to_json(override: LimitOverride, defaults: Limits) -> dict[str, Any]:
    return {
        "tenantId": override.tenant_id,
        "jobType": override.job_type,
        "limits": override.limits.to_json(),
        "effective": override.limits.over(defaults).to_json(),
    }


async def held_text(deps: Deps, calls: BoundedCalls, job: Job) -> str | None:
    """Why the leader holds ``job`` back, when it is due and held (its latest report)."""
    if job.status is not Status.PENDING or job.cron is not None:
        return None
    if job.scheduled_at > deps.clock.now():
        return None
    report = await calls.call(deps.store.flow_report)
    if report is None:
        return None
    hold = report.hold_of(*scopes_of(job.tenant_id, job.job_type, job.concurrency_key))
    return None if hold is None else hold.text


def register_flow_routes(routes: RouteTable, deps: Deps, calls: BoundedCalls) -> None:
    """Add the flow-control routes to ``routes``."""
    defaults = deps.registry.limits()

    @routes.route(ops.LIMITS_LIST)
    async def flow_limits() -> Response:
        tenant = current_principal().scope(request.args.get("tenantId") or None)
        overrides = await calls.call(deps.store.limit_overrides, tenant)
        body = {
            "defaults": {name: limits.to_json() for name, limits in sorted(defaults.items())},
            "overrides": [
                override_to_json(o, defaults.get(o.job_type, Limits())) for o in overrides
            ],
        }
        return json_response(body, 200)

    @routes.route(ops.PUT_LIMITS)
    async def put_flow_limits(job_type: str, body: Any) -> Response:
        tenant = current_principal().scope(request.args.get("tenantId") or None)
        if tenant is None:
            raise ValidationError("tenantId is required: limits are overridden per tenant")
        if job_type not in deps.registry:
            raise ValidationError(f"jobType: unknown job type {job_type!r}")
        limits = Limits.from_json({k: v for k, v in body.items() if v is not None})
        override = LimitOverride(tenant_id=check_tenant(tenant), job_type=job_type, limits=limits)
        await calls.call(deps.store.put_limit_override, override)
        g.audit_detail = f"limits of {job_type} set to {limits.to_json()}"
        log.info("flow limits set", extra={"tenant": tenant, "job_type": job_type})
        return json_response(override_to_json(override, defaults.get(job_type, Limits())), 200)

    @routes.route(ops.WEIGHTS)
    async def flow_weights() -> Response:
        tenant = current_principal().tenant
        weights = await calls.call(deps.store.tenant_weights)
        shown = [w for w in weights if tenant is None or w.tenant_id == tenant]
        return json_response(
            {"weights": [{"tenantId": w.tenant_id, "weight": w.weight} for w in shown]}, 200
        )

    @routes.route(ops.PUT_WEIGHT)
    async def put_flow_weight(tenant_id: str, body: Any) -> Response:
        if current_principal().tenant is not None:
            raise Forbidden("only an admin of every tenant sets the tenants' weights")
        weight = TenantWeight(
            tenant_id=check_tenant(tenant_id), weight=check_weight(body["weight"])
        )
        await calls.call(deps.store.put_tenant_weight, weight)
        g.audit_detail = f"weight of {tenant_id} set to {weight.weight}"
        log.info("flow weight set", extra={"tenant": tenant_id, "weight": weight.weight})
        return json_response({"tenantId": weight.tenant_id, "weight": weight.weight}, 200)

    @routes.route(ops.HELD)
    async def flow_held() -> Response:
        tenant = current_principal().scope(request.args.get("tenantId") or None)
        raw = request.args.get("limit", "10")
        if not raw.isdigit() or not 1 <= int(raw) <= 100:
            raise ValidationError("limit: an integer from 1 to 100")
        report = await calls.call(deps.store.flow_report)
        return json_response(busiest_to_json(report, tenant, int(raw)), 200)
