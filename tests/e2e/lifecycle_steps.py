"""Helpers of the lifecycle tests against a ``jobscheduler dev`` subprocess: create a job
(it must be stored pending), match a job's status, read a metric of the server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from jobscheduler.testing import metric_value
from tests.support.dev_server import DevServer
from tests.support.jobs_api import create_job

Factory = Callable[..., Awaitable[DevServer]]
Body = Callable[..., dict[str, Any]]


def is_status(*statuses: str) -> Callable[[dict[str, Any]], bool]:
    return lambda job: job["status"] in statuses


async def create(
    http: httpx.AsyncClient, server: DevServer, body: dict[str, Any]
) -> dict[str, Any]:
    created = await create_job(http, server, body)
    assert created["status"] == "pending"
    return created


async def metric(http: httpx.AsyncClient, server: DevServer, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    return metric_value((await http.get(f"{server.metrics_url}/metrics")).text, name, **labels)
