"""The flow-control operations of the API (limits, weights, what is held back), in the terms
of :mod:`._operations`: each builds the :class:`~._call.Call` its client method sends."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ._call import Call, dict_of


def flow_limits(tenant_id: str | None = None) -> Call[dict[str, Any]]:
    """The job types' limits (``defaults``) and the tenants' ``overrides`` (a tenant's admin
    key: its own)."""
    params = [("tenantId", tenant_id)] if tenant_id else []
    return Call("GET", "/flow/limits", dict_of, params=params)


def put_flow_limits(
    job_type: str,
    tenant_id: str | None = None,
    *,
    concurrency: int | None = None,
    max_running: int | None = None,
    rate_limit: str | None = None,
    key_rate_limit: str | None = None,
    burst: int | None = None,
) -> Call[dict[str, Any]]:
    """Override ``job_type``'s limits in one tenant (the key's, without ``tenant_id``); the
    limits not given are the handler's (none given: the override is removed)."""
    params = [("tenantId", tenant_id)] if tenant_id else []
    body = {
        "concurrency": concurrency,
        "maxRunning": max_running,
        "rateLimit": rate_limit,
        "keyRateLimit": key_rate_limit,
        "burst": burst,
    }
    path = f"/flow/limits/{quote(job_type, safe='')}"
    return Call("PUT", path, dict_of, params=params, body=body)


def flow_weights() -> Call[dict[str, Any]]:
    """The tenants' weights in fair claims (a tenant not listed weighs 1)."""
    return Call("GET", "/flow/weights", dict_of)


def put_flow_weight(tenant_id: str, weight: int) -> Call[dict[str, Any]]:
    """Set a tenant's weight, 1 to 1000 (an admin key of every tenant)."""
    path = f"/flow/weights/{quote(tenant_id, safe='')}"
    return Call("PUT", path, dict_of, body={"weight": weight})


def flow_held(tenant_id: str | None = None, limit: int = 10) -> Call[dict[str, Any]]:
    """What the leader's latest claims held back, busiest first: ``holds`` (why, and how
    many due jobs wait)."""
    params = [("limit", str(limit))]
    if tenant_id:
        params.append(("tenantId", tenant_id))
    return Call("GET", "/flow/held", dict_of, params=params)
