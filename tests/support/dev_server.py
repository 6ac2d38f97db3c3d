"""A real ``jobscheduler dev`` subprocess for a test, driven over HTTP."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import trio

from jobscheduler.domain.keys import Role, new_key
from jobscheduler.store.sqlite import SQLiteJobStore
from jobscheduler.testing import free_port

STARTUP_TIMEOUT = 30.0


class DevServer:
    """One ``python -m jobscheduler dev`` process with its own SQLite file and ports.

    It runs with ``AUTH=required`` unless the test passes ``AUTH``; :meth:`start` then puts
    an all-tenant admin key (:attr:`key`) in its SQLite file first.
    """

    def __init__(self, tmp_path: Path, env: dict[str, str], argv: list[str] | None = None) -> None:
        self.argv = argv or [sys.executable, "-m", "jobscheduler", "dev"]
        self.db_path = tmp_path / "jobs.db"
        self.log_path = tmp_path / "dev.log"
        self.api_port = free_port()
        self.metrics_port = free_port()
        self.env = {
            **os.environ,
            "SQLITE_PATH": str(self.db_path),
            "API_PORT": str(self.api_port),
            "METRICS_PORT": str(self.metrics_port),
            "LOG_LEVEL": "DEBUG",
            "AUTH": "required",
            **env,
        }
        self.key: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{self.api_port}"
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}"

    @property
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    async def create_admin_key(self) -> str:
        """An all-tenant admin key in this server's SQLite file (made before it starts)."""
        record, token = new_key(tenant=None, role=Role.ADMIN, name="e2e", now=datetime.now(UTC))
        store = SQLiteJobStore(self.db_path)
        await store.start()
        try:
            await store.insert_key(record)
        finally:
            await store.close()
        return token

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
        if self.env.get("AUTH") == "required" and self.key is None:
            self.key = await self.create_admin_key()
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        with trio.fail_after(STARTUP_TIMEOUT):
            async with httpx.AsyncClient() as client:
                while True:
                    if self.proc.poll() is not None:
                        raise AssertionError(f"dev exited early:\n{self.log()}")
                    try:
                        api = await client.get(f"{self.url}/healthz")
                        metrics = await client.get(f"{self.metrics_url}/healthz")
                        if api.status_code == metrics.status_code == 200:
                            return
                    except httpx.TransportError:
                        pass
                    await trio.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Signal the process and wait for it; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            deadline = time.monotonic() + timeout
            while self.proc.poll() is None and time.monotonic() < deadline:
                await trio.sleep(0.05)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(f"dev did not stop within {timeout}s:\n{self.log()[-4000:]}")
        return self.proc.returncode

    def db(self) -> sqlite3.Connection:
        """A direct connection to the dev server's SQLite file (for arranging faults)."""
        conn = sqlite3.connect(self.db_path, isolation_level=None, timeout=10)
        conn.execute("PRAGMA busy_timeout=10000")
        return conn
