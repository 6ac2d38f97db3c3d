"""One role as a subprocess: ``python -m jobscheduler run-<role>`` for a test.

A :class:`RoleProcess` is a :class:`jobscheduler.testing.ServerProcess` (the supervisor the
tests and the bench share) that knows its role: it is ready once ``/healthz`` answers 200 on
its metrics port (and on the API's, for the api role) and it logged ``ready``; it reads its
``/metrics`` (through :func:`jobscheduler.testing.metric_value`) and tells whether it leads.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx

from jobscheduler.testing import READY_LINE, ServerProcess, metric_value

ROLES = ("api", "scheduler", "executor", "reaper")
#: Log lines left out of a tail: pymongo's DEBUG chatter and one-per-job routine events.
_ROUTINE = re.compile(r"logger=pymongo\.|^\S+ (?:info|debug)\s+job (?:created|completed) ")


class RoleProcess(ServerProcess):
    """One ``python -m jobscheduler run-<role>`` subprocess (``env`` names its
    ``WORKER_ID``, ``API_PORT`` and ``METRICS_PORT``)."""

    quiet = _ROUTINE

    def __init__(self, role: str, name: str, env: Mapping[str, str], log_path: Path) -> None:
        self.role = role
        self.worker_id = env["WORKER_ID"]
        self.metrics_url = f"http://127.0.0.1:{env['METRICS_PORT']}"
        self.url = f"http://127.0.0.1:{env['API_PORT']}"
        health = [f"{self.metrics_url}/healthz"]
        if role == "api":
            health.append(f"{self.url}/healthz")
        super().__init__(
            name,
            [sys.executable, "-m", "jobscheduler", f"run-{role}"],
            env,
            log_path,
            health_urls=health,
            ready_line=READY_LINE,
        )

    async def metrics(self, http: httpx.AsyncClient) -> str:
        response = await http.get(f"{self.metrics_url}/metrics", timeout=2.0)
        assert response.status_code == 200, response.text
        return response.text

    async def metric(self, http: httpx.AsyncClient, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` with ``labels`` (see :func:`metric_value`)."""
        return metric_value(await self.metrics(http), name, **labels)

    async def is_leader(self, http: httpx.AsyncClient) -> bool:
        """``scheduler_is_leader 1.0`` on /metrics (False if the process does not answer)."""
        try:
            return await self.metric(http, "scheduler_is_leader") == 1.0
        except httpx.TransportError:
            return False

    def __repr__(self) -> str:
        return f"<{self.name} worker={self.worker_id} pid={self.proc and self.proc.pid}>"
