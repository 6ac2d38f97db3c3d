"""The reading routes: ``GET /jobs`` with filters and cursor pages, and ``GET /stats``.

``GET /jobs`` answers the seed's bare array of one tenant's jobs (``tenantId``, required), or
of every tenant's with ``allTenants=true`` (an all-tenant admin's explicit form); when a page
is full, a ``Link: <...>; rel="next"`` header carries the URL of the next page (the same
query with an opaque ``cursor``). ``GET /stats?tenantId=`` reports counts by status and job
type, the queue lag (age of the oldest due pending one-off job) and the jobs completed /
dead-lettered in the last 1, 5 and 15 minutes.
"""

from __future__ import annotations

from typing import Any

from quart import Response, request

from jobscheduler.api.auth import current_principal
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.job_filters import (
    encode_cursor,
    parse_list_request,
    parse_tenant_query,
)
from jobscheduler.api.replies import json_response, link_next_page
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.schemas import manage as manage_ops
from jobscheduler.api.schemas import stats as stats_ops
from jobscheduler.api.tenancy import listing_args
from jobscheduler.domain.model import format_time, job_to_json
from jobscheduler.roles.deps import Deps
from jobscheduler.store.query import Cursor, JobStats


def stats_to_json(stats: JobStats, *, tenant: str | None, now: Any) -> dict[str, Any]:
    """The ``GET /stats`` body."""
    by_status: dict[str, int] = {}
    by_type: dict[str, int] = {}
    counts: dict[str, dict[str, int]] = {}
    for (status, job_type), n in sorted(stats.counts.items()):
        by_status[status.value] = by_status.get(status.value, 0) + n
        by_type[job_type] = by_type.get(job_type, 0) + n
        counts.setdefault(status.value, {})[job_type] = n
    out: dict[str, Any] = {
        "tenantId": tenant,
        "at": format_time(now),
        "byStatus": by_status,
        "byJobType": by_type,
        "counts": counts,
        "queueLagSeconds": round(stats.queue_lag(now), 3),
        "finished": {
            f"{w.minutes}m": {"completed": w.completed, "failed": w.failed} for w in stats.windows
        },
    }
    if stats.oldest_due_at is not None:
        out["oldestDueAt"] = format_time(stats.oldest_due_at)
    return out


def register_listing_routes(routes: RouteTable, deps: Deps, calls: BoundedCalls) -> None:
    """Add ``GET /jobs`` and ``GET /stats`` to ``routes`` (``calls`` bounds their store
    reads by API_STORE_TIMEOUT, see bounded.py)."""
    bounded = calls.call

    @routes.route(manage_ops.LIST_FILTERED)
    async def list_jobs() -> Response:
        args = request.args
        principal = current_principal()
        values, every_tenant = listing_args(args)
        query, limit, cursor = parse_list_request(values, args.getlist("status"))
        if not every_tenant:
            principal.scope(query.tenant_id)
        if query.template_id is not None:
            # An unknown template and another tenant's are the same 404, as when reading
            # the template by id (so a listing cannot tell whether B's template exists).
            await bounded(deps.store.get, query.template_id, tenant=principal.tenant)
        jobs = await bounded(deps.store.find_jobs, query, limit, cursor)
        response = json_response([job_to_json(job) for job in jobs], 200)
        if len(jobs) == limit:
            link_next_page(response, encode_cursor(Cursor.after(jobs[-1], query.sort)))
        return response

    @routes.route(stats_ops.STATS_OP)
    async def stats() -> Response:
        requested = parse_tenant_query(request.args)
        tenant = current_principal().scope(requested)
        now = deps.clock.now()
        result = await bounded(deps.store.stats, tenant, now)
        return json_response(stats_to_json(result, tenant=tenant, now=now), 200)
