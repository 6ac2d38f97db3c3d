"""jobscheduler.testing's process supervisor against a tiny HTTP server subprocess: ready
once its health URL answers and its log says so, a start-up exit or a stop that overruns is
a ProcessFailed with the log's tail, and a teardown tells an expected exit from a crash."""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from jobscheduler.testing import ProcessFailed, ServerProcess, free_port, stop_all

#: An HTTP server that answers 200 to everything, logs ``ready`` once it listens and exits
#: 0 on SIGTERM (``IGNORE_TERM`` in its argv: it ignores SIGTERM).
SERVER = """
import http.server, signal, sys
if "IGNORE_TERM" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok)
print("2026-01-01T00:00:00.000Z info     ready", flush=True)
server.serve_forever()
"""


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def server(tmp_path: Path, name: str = "tiny", *extra: str) -> ServerProcess:
    port = free_port()
    return ServerProcess(
        name,
        [sys.executable, "-c", SERVER, str(port), *extra],
        {},
        tmp_path / f"{name}.log",
        health_urls=[f"http://127.0.0.1:{port}/healthz"],
        ready_line=r"^\S+ info\s+ready\b",
    )


async def test_a_process_is_ready_once_it_answers_and_logged_ready_and_stops_with_code_0(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    process = server(tmp_path)
    process.spawn()
    await process.wait_ready(http, timeout=30)
    assert process.running()
    assert await process.stop() == 0
    assert not process.running()
    assert not process.exited_on_its_own()


async def test_a_process_that_exits_during_start_up_fails_with_its_log(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    process = ServerProcess(
        "broken",
        [sys.executable, "-c", "print('no config'); raise SystemExit(3)"],
        {},
        tmp_path / "broken.log",
        health_urls=[f"http://127.0.0.1:{free_port()}/healthz"],
    )
    process.spawn()
    with pytest.raises(ProcessFailed, match=r"(?s)broken exited with 3 during start-up.*no config"):
        await process.wait_ready(http, timeout=30)


async def test_a_process_that_ignores_its_signal_is_killed_after_the_timeout_and_reported(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    process = server(tmp_path, "stubborn", "IGNORE_TERM")
    process.spawn()
    await process.wait_ready(http, timeout=30)
    with pytest.raises(ProcessFailed, match=r"stubborn did not exit within 0\.5s of SIGTERM"):
        await process.stop(timeout=0.5)
    assert not process.running()  # killed


async def test_a_teardown_reports_an_exit_unasked_and_leaves_a_killed_process_alone(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    crashed, killed, healthy = (server(tmp_path, name) for name in ("crashed", "killed", "ok"))
    for process in (crashed, killed, healthy):
        process.spawn()
        await process.wait_ready(http, timeout=30)
    assert crashed.proc is not None
    crashed.proc.send_signal(signal.SIGKILL)  # not through the supervisor: a crash
    crashed.proc.wait(10)
    killed.kill()
    with pytest.raises(ProcessFailed, match="crashed had already exited on its own"):
        crashed.send(signal.SIGTERM)
    assert await stop_all([crashed, killed, healthy]) == [
        "crashed had exited on its own with code -9"
    ]
    assert not healthy.running()
