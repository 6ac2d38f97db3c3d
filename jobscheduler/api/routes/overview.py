"""``GET /stats/overview``: what the dashboard's Overview shows, in one read.

Tenant scope follows the tenancy rules (``GET /stats``'s): the figures of the key's tenant,
or of the one named by ``tenantId``, or of every tenant for a key that sees every tenant and
names none. The cluster (the leader, schedulers and executors with their hosts, pids, job
types and jobs in flight) is a fact about every tenant's work, so only a principal that sees
every tenant gets it; a tenant-bound key gets ``"cluster": null``
(see the docs, "Keys and tenants").
``retention`` is how long finished jobs are kept by default and the reaper's last prune;
``held`` the busiest scopes flow control holds back (the leader's latest report, in scope).
"""

from __future__ import annotations

from quart import Response, request

from jobscheduler.api.auth import current_principal
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.job_filters import parse_tenant_query
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.schemas.stats import OVERVIEW_OP
from jobscheduler.domain.flow import busiest_to_json
from jobscheduler.domain.overview import overview_to_json
from jobscheduler.domain.retention import format_keep
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.retention import default_keep

#: Held scopes the Overview lists, busiest first.
BUSIEST = 5


def register_overview_route(routes: RouteTable, deps: Deps, calls: BoundedCalls) -> None:
    """Add ``GET /stats/overview`` to ``routes`` (store reads bounded by ``calls``)."""
    bounded = calls.call

    @routes.route(OVERVIEW_OP)
    async def overview() -> Response:
        requested = parse_tenant_query(request.args)
        principal = current_principal()
        tenant = principal.scope(requested)
        now = deps.clock.now()
        stats = await bounded(deps.store.overview_stats, tenant, now)
        workers = None
        if principal.tenant is None:
            workers = await bounded(deps.store.live_workers, now)
        body = overview_to_json(stats, tenant=tenant, now=now, workers=workers)
        last = await bounded(deps.store.last_prune)
        body["retention"] = {
            "defaults": format_keep(default_keep(deps.settings)),
            "lastPrune": None if last is None else last.to_json(),
        }
        body["held"] = busiest_to_json(await bounded(deps.store.flow_report), tenant, BUSIEST)
        return json_response(body, 200)
