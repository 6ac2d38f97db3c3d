"""One role as a subprocess: ``python -m jobscheduler run-<role>`` for a test.

A :class:`RoleProcess` spawns the role with its environment, logging to a file; waits until
it is ready (``/healthz`` answers 200 and the role logged ``ready``); reads its ``/metrics``
(through :func:`jobscheduler.testing.metric_value`); and signals, stops or kills it,
remembering whether the test did so, so that teardown can tell an expected exit from a crash.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import trio

from jobscheduler.testing import metric_value

#: Bound on a role process becoming ready (interpreter start, imports, connections).
STARTUP_TIMEOUT = 45.0
#: Bound on a role process exiting after SIGTERM (executors get SHUTDOWN_GRACE first).
STOP_TIMEOUT = 30.0
#: Log lines printed per process when a test fails.
TAIL_LINES = 60

ROLES = ("api", "scheduler", "executor", "reaper")
#: Log lines left out of a tail: pymongo's DEBUG chatter and one-per-job routine events.
_ROUTINE = re.compile(r"logger=pymongo\.|^\S+ (?:info|debug)\s+job (?:created|completed) ")


class RoleProcess:
    """One ``python -m jobscheduler run-<role>`` subprocess."""

    def __init__(self, role: str, name: str, env: Mapping[str, str], log_path: Path) -> None:
        self.role = role
        self.name = name
        self.env = dict(env)
        self.worker_id = self.env["WORKER_ID"]
        self.log_path = log_path
        self.metrics_url = f"http://127.0.0.1:{self.env['METRICS_PORT']}"
        self.url = f"http://127.0.0.1:{self.env['API_PORT']}"
        self.proc: subprocess.Popen[bytes] | None = None
        #: Extra command-line arguments after ``run-<role>`` (e.g. ``["--app", "myjobs"]``).
        self.args: list[str] = []
        #: The test signalled the process (any exit after that is expected).
        self.signalled = False
        #: The test SIGKILLed the process (teardown leaves it alone, any exit code goes).
        self.killed = False

    def spawn(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jobscheduler", f"run-{self.role}", *self.args],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The last log lines, without pymongo's DEBUG chatter and the routine lines of each
        job created or completed (the file has everything)."""
        kept = [line for line in self.log().splitlines() if not _ROUTINE.search(line)]
        return "\n".join(kept[-lines:])

    def ready_logged(self) -> bool:
        """The role logged ``ready`` (every role of the process started)."""
        return re.search(r"^\S+ info\s+ready\b", self.log(), re.MULTILINE) is not None

    async def wait_ready(self, http: httpx.AsyncClient, timeout: float = STARTUP_TIMEOUT) -> None:
        """Poll ``/healthz`` on the metrics port (and the API's, for the api role) until
        200 and the role has logged ``ready``."""
        assert self.proc is not None
        try:
            with trio.fail_after(timeout):
                while True:
                    if self.proc.poll() is not None:
                        raise AssertionError(
                            f"{self.name} exited with {self.proc.returncode} during start-up:\n"
                            f"{self.tail()}"
                        )
                    if await self._healthy(http) and self.ready_logged():
                        return
                    await trio.sleep(0.05)
        except trio.TooSlowError:
            raise AssertionError(
                f"{self.name} not ready within {timeout}s:\n{self.tail()}"
            ) from None

    async def _healthy(self, http: httpx.AsyncClient) -> bool:
        urls = [f"{self.metrics_url}/healthz"]
        if self.role == "api":
            urls.append(f"{self.url}/healthz")
        try:
            for url in urls:
                response = await http.get(url, timeout=2.0)
                if response.status_code != 200:
                    return False
        except httpx.TransportError:
            return False
        return True

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

    def exited_on_its_own(self) -> bool:
        """The process ended although nobody signalled it."""
        return self.proc is not None and self.proc.poll() is not None and not self.signalled

    def send(self, sig: int) -> None:
        """Send ``sig`` without waiting (see :meth:`stop` to wait for the exit)."""
        assert self.proc is not None
        assert not self.exited_on_its_own(), (
            f"{self.name} had already exited on its own with code {self.proc.returncode}"
        )
        self.signalled = True
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL and reap; teardown then leaves this process alone."""
        assert self.proc is not None
        self.send(signal.SIGKILL)
        self.killed = True
        self.proc.wait(10)

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        """Signal the process and wait for it to exit; returns its exit code. A process
        that does not exit in time is SIGKILLed and reported as an AssertionError."""
        assert self.proc is not None
        if not self.signalled:
            self.send(sig)
        if self.proc.poll() is None:
            deadline = time.monotonic() + timeout
            while self.proc.poll() is None and time.monotonic() < deadline:
                await trio.sleep(0.05)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(
                    f"{self.name} did not exit within {timeout}s of {signal.Signals(sig).name}:\n"
                    f"{self.tail()}"
                )
        code: int = self.proc.returncode
        return code

    async def stop_ok(self, sig: int = signal.SIGTERM) -> None:
        """Stop the process from the test and require exit code 0."""
        code = await self.stop(sig)
        assert code == 0, f"{self.name} exited {code} on {signal.Signals(sig).name}:\n{self.tail()}"

    def __repr__(self) -> str:
        return f"<{self.name} worker={self.worker_id} pid={self.proc and self.proc.pid}>"
