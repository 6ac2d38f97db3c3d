"""A real ``jobscheduler dev`` subprocess for a test, driven over HTTP."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import httpx

from jobscheduler.store.sqlite import SQLiteJobStore
from jobscheduler.testing import ServerProcess, free_port, insert_admin_key


class DevServer(ServerProcess):
    """One ``python -m jobscheduler dev`` process with its own SQLite file and ports, on the
    supervisor every suite shares (:class:`jobscheduler.testing.ServerProcess`): ready once
    the API's and the metrics listener's ``/healthz`` answer 200.

    It runs with ``AUTH=required`` unless the test passes ``AUTH``; :meth:`start` then puts
    an all-tenant admin key (:attr:`key`) in its SQLite file first.
    """

    def __init__(self, tmp_path: Path, env: dict[str, str], argv: list[str] | None = None) -> None:
        self.db_path = tmp_path / "jobs.db"
        self.api_port = free_port()
        self.metrics_port = free_port()
        self.url = f"http://127.0.0.1:{self.api_port}"
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}"
        super().__init__(
            "dev",
            argv or [sys.executable, "-m", "jobscheduler", "dev"],
            {
                **os.environ,
                "SQLITE_PATH": str(self.db_path),
                "API_PORT": str(self.api_port),
                "METRICS_PORT": str(self.metrics_port),
                "LOG_LEVEL": "DEBUG",
                "AUTH": "required",
                **env,
            },
            tmp_path / "dev.log",
            health_urls=[f"{self.url}/healthz", f"{self.metrics_url}/healthz"],
        )
        self.key: str | None = None

    @property
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    async def create_key(self, http: httpx.AsyncClient, tenant: str, role: str) -> str:
        """A key of ``tenant`` with ``role``, made through the running server's ``POST /keys``
        with its admin key."""
        response = await http.post(
            f"{self.url}/keys",
            json={"tenantId": tenant, "role": role, "name": f"e2e-{role}"},
            headers=self.auth_headers,
        )
        assert response.status_code == 201, response.text
        token: str = response.json()["key"]
        return token

    async def start(self) -> None:
        """Put the admin key in the SQLite file when needed, spawn, wait until ready."""
        if self.env.get("AUTH") == "required" and self.key is None:
            self.key = await insert_admin_key(SQLiteJobStore(self.db_path), "e2e")
        self.spawn()
        async with httpx.AsyncClient() as http:
            await self.wait_ready(http)

    def db(self) -> sqlite3.Connection:
        """A direct connection to the dev server's SQLite file (for arranging faults)."""
        conn = sqlite3.connect(self.db_path, isolation_level=None, timeout=10)
        conn.execute("PRAGMA busy_timeout=10000")
        return conn
