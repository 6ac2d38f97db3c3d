"""``GET /stats/overview``: what the dashboard's Overview shows, in one read.

Tenant scope follows the tenancy rules (``GET /stats``'s): the figures of the key's tenant,
or of the one named by ``tenantId``, or of every tenant for a key that sees every tenant and
names none. The cluster (the leader, schedulers and executors with their hosts, pids, job
types and jobs in flight) is a fact about every tenant's work, so only a principal that sees
every tenant gets it; a tenant-bound key gets ``"cluster": null`` (see README "Security").
"""

from __future__ import annotations

from collections.abc import Callable

from quart import Response, request
from quart_trio import QuartTrio

from jobscheduler.api.actions import Caller, direct
from jobscheduler.api.auth import current_principal, requires
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.job_filters import parse_tenant_query
from jobscheduler.api.route_table import Operation, Param, Reply, Schema, table_of
from jobscheduler.api.schemas.jobs import TEXT, TIME
from jobscheduler.domain.keys import Role
from jobscheduler.domain.overview import overview_to_json
from jobscheduler.roles.deps import Deps

PARAMETERS = ("tenantId",)

_COUNT: Schema = {"type": "integer", "minimum": 0}
_WORKER: Schema = {
    "type": "object",
    "required": ["id", "role", "host", "pid", "jobTypes", "inFlight", "leader", "seenAt"],
    "properties": {
        "id": {"type": "string"},
        "role": {"enum": ["scheduler", "executor"]},
        "host": {"type": "string"},
        "pid": {"type": "integer"},
        "jobTypes": {"type": "array", "items": {"type": "string"}},
        "inFlight": _COUNT,
        "leader": {"type": "boolean"},
        "startedAt": TIME,
        "seenAt": TIME,
        "secondsSinceSeen": {"type": "number", "minimum": 0},
    },
}
_SERIES: Schema = {"type": "array", "items": _COUNT}

OVERVIEW: Schema = {
    "type": "object",
    "required": ["byStatus", "total", "dlq", "queueLagSeconds", "throughput", "cluster"],
    "properties": {
        "tenantId": {"type": ["string", "null"]},
        "at": TIME,
        "byStatus": {"type": "object", "additionalProperties": _COUNT},
        "total": _COUNT,
        "dlq": _COUNT,
        "queueLagSeconds": {"type": "number", "minimum": 0},
        "oldestDueAt": {"type": ["string", "null"], "format": "date-time"},
        "throughput": {
            "type": "object",
            "required": ["start", "minutes", "completed", "failed"],
            "properties": {
                "start": TIME,
                "minutes": _COUNT,
                "completed": _SERIES,
                "failed": _SERIES,
            },
        },
        "cluster": {
            "type": ["object", "null"],
            "description": "null for a tenant-bound key",
            "properties": {
                "leader": {"oneOf": [_WORKER, {"type": "null"}]},
                "leaders": _COUNT,
                "schedulers": {"type": "array", "items": _WORKER},
                "executors": {"type": "array", "items": _WORKER},
            },
        },
    },
}

OVERVIEW_OP = Operation(
    id="overview",
    method="GET",
    rule="/stats/overview",
    summary="The dashboard's Overview: counts by status, queue lag, jobs finished per minute "
    "over the last hour, the leader and the live executors",
    tag="jobs",
    params=(Param(name="tenantId", where="query", schema=TEXT, description="one tenant"),),
    responses={200: Reply(description="the figures", schema=OVERVIEW)},
)


def register_overview_route(
    app: QuartTrio,
    deps: Deps,
    json_response: Callable[..., Response],
    store_calls: BoundedCalls | None = None,
) -> None:
    """Add ``GET /stats/overview`` to ``app`` (store reads bounded by ``store_calls``)."""
    bounded: Caller = direct if store_calls is None else store_calls.call

    @table_of(app).route(OVERVIEW_OP)
    @requires(Role.READER)
    async def overview() -> Response:
        requested = parse_tenant_query(request.args, PARAMETERS)
        principal = current_principal()
        tenant = principal.scope(requested)
        now = deps.clock.now()
        stats = await bounded(deps.store.overview_stats, tenant, now)
        workers = None
        if principal.tenant is None:
            workers = await bounded(deps.store.live_workers, now)
        body = overview_to_json(stats, tenant=tenant, now=now, workers=workers)
        return json_response(body, 200)
