"""``jobscheduler bench``: the performance targets, measured through the public HTTP API.

Starts a fresh ``jobscheduler dev`` subprocess on a temporary SQLite file and free ports,
then measures, printing figures (never asserting them — machines are shared and noisy):

1. idle RSS of the dev process;
2. burst drain: N ``noop`` jobs all due at one instant; drain rate = N / (last completion -
   due instant), from the jobs' own ``updatedAt``;
3. steady load: R jobs/s for D seconds, each due 1 s after creation; start delay
   (``claimedAt - scheduledAt``) percentiles and ``POST /jobs`` latency percentiles.

Client and server share the machine. To keep the client's share small, requests go through
a minimal keep-alive HTTP/1.1 client on raw trio streams (httpx costs several times more CPU
per request than the server under test).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import trio

from ..config import parse_duration
from ..model import format_time, parse_time
from .stats import format_seconds, percentiles

HELP = "benchmark a fresh `jobscheduler dev` (drain rate, start delay, API latency, RSS)"
PCTS = (50, 95, 99)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--burst", type=int, default=5000, help="jobs in the burst (5000)")
    parser.add_argument("--rate", type=float, default=200.0, help="steady jobs/s (200)")
    parser.add_argument(
        "--duration", type=parse_duration, default=20.0, help="steady phase length (20s)"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="HTTP connections (32)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (database, log)"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class _Connection:
    """One keep-alive HTTP/1.1 connection: a request, then its full response, in turn."""

    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._stream: trio.SocketStream | None = None
        self._buffer = b""

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self._stream is None:
            self._stream = await trio.open_tcp_stream(self._host, self._port)
            self._buffer = b""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        await self._stream.send_all(head.encode() + body)
        while b"\r\n\r\n" not in self._buffer:
            await self._receive()
        header, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        while len(self._buffer) < length:
            await self._receive()
        payload, self._buffer = self._buffer[:length], self._buffer[length:]
        return status, payload

    async def _receive(self) -> None:
        assert self._stream is not None
        data = await self._stream.receive_some(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        self._buffer += data

    async def aclose(self) -> None:
        if self._stream is not None:
            await self._stream.aclose()


class _Pool:
    """A fixed number of connections handed out one request at a time."""

    def __init__(self, url: str, size: int) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self._send, self._receive = trio.open_memory_channel[_Connection](size)
        self._all = [_Connection(host, int(port)) for _ in range(size)]
        for conn in self._all:
            self._send.send_nowait(conn)

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        conn = await self._receive.receive()
        try:
            data = json.dumps(body).encode() if body is not None else b""
            status, payload = await conn.request(method, path, data)
        finally:
            self._send.send_nowait(conn)
        return status, json.loads(payload) if payload else None

    async def aclose(self) -> None:
        for conn in self._all:
            await conn.aclose()


def _summary(label: str, seconds: list[float]) -> str:
    if not seconds:
        return f"{label}: no samples"
    pct = percentiles(seconds, (*PCTS, 100))
    parts = ", ".join(f"p{p} {format_seconds(pct[p])}" for p in PCTS)
    return f"{label}: {parts}, max {format_seconds(pct[100])} (n={len(seconds)})"


class _Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.api = f"http://127.0.0.1:{_free_port()}"
        self.metrics_port = _free_port()
        self.proc: trio.Process | None = None
        self.run_id = uuid.uuid4().hex[:8]

    async def start_dev(self) -> None:
        env = {
            **os.environ,
            "SQLITE_PATH": str(self.workdir / "bench.db"),
            "API_PORT": self.api.rsplit(":", 1)[1],
            "METRICS_PORT": str(self.metrics_port),
            "LOG_LEVEL": "WARNING",
        }
        with (self.workdir / "dev.log").open("wb") as log:
            self.proc = await trio.lowlevel.open_process(
                [sys.executable, "-m", "jobscheduler", "dev"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        with trio.fail_after(30):
            async with httpx.AsyncClient() as client:
                while True:
                    try:
                        if (await client.get(f"{self.api}/healthz")).status_code == 200:
                            return
                    except httpx.TransportError:
                        await trio.sleep(0.05)

    async def stop_dev(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            with trio.move_on_after(20):
                await self.proc.wait()
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()

    async def _post(self, client: _Pool, body: dict[str, Any], latencies: list[float]) -> str:
        started = time.perf_counter()
        status, created = await client.request("POST", "/jobs", body)
        latencies.append(time.perf_counter() - started)
        if status != 201:
            raise RuntimeError(f"POST /jobs -> {status}: {created}")
        job_id: str = created["id"]
        return job_id

    async def _jobs(
        self, client: _Pool, tenant: str, status: str | None = None
    ) -> list[dict[str, Any]]:
        query = f"/jobs?tenantId={tenant}&limit=5000" + (f"&status={status}" if status else "")
        code, jobs = await client.request("GET", query)
        if code != 200:
            raise RuntimeError(f"GET {query} -> {code}: {jobs}")
        return list(jobs)

    async def _completed_total(self) -> float:
        """Jobs completed so far, from the metrics listener: cheap to poll, unlike listing
        thousands of jobs through the API, which would steal the event loop being measured."""
        host = self.api.removeprefix("http://").rsplit(":", 1)[0]
        conn = _Connection(host, self.metrics_port)
        try:
            _, text = await conn.request("GET", "/metrics")
        finally:
            await conn.aclose()
        prefix = "executor_jobs_processed_total{"
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.decode().splitlines()
            if line.startswith(prefix) and 'result="completed"' in line
        )

    async def _wait_completed(self, target: float) -> None:
        with trio.fail_after(300):
            # Polling another process's metrics: there is no event to wait on.
            while await self._completed_total() < target:  # noqa: ASYNC110
                await trio.sleep(0.1)

    async def burst(self, client: _Pool) -> None:
        n = self.args.burst
        tenant = f"bench-burst-{self.run_id}"
        latencies: list[float] = []
        # Estimate the submission rate on a small sample, then pick a due instant safely after
        # the whole burst will have been accepted.
        probe_started = time.perf_counter()
        probe = [
            {
                "idempotencyKey": f"{tenant}-probe-{i}",
                "tenantId": f"{tenant}-probe",
                "jobType": "noop",
                "scheduledAt": format_time(datetime.now(UTC) + timedelta(days=1)),
            }
            for i in range(200)
        ]
        await self._send_all(client, probe, latencies)
        rate = len(probe) / (time.perf_counter() - probe_started)
        print(f"probe: {rate:.0f} req/s")
        due = datetime.now(UTC) + timedelta(seconds=n / rate * 2.5 + 3)
        due = due.replace(microsecond=0) + timedelta(seconds=1)
        bodies = [
            {
                "idempotencyKey": f"{tenant}-{i}",
                "tenantId": tenant,
                "jobType": "noop",
                "scheduledAt": format_time(due),
            }
            for i in range(n)
        ]
        baseline = await self._completed_total()
        started = time.perf_counter()
        await self._send_all(client, bodies, latencies)
        submitted = time.perf_counter() - started
        if datetime.now(UTC) >= due:
            raise RuntimeError("submission overran the due instant; rerun with a smaller --burst")
        print(
            f"burst: {n} jobs accepted in {submitted:.2f}s ({n / submitted:.0f} req/s, "
            f"{self.args.concurrency} connections); all due at {format_time(due)}"
        )
        await self._wait_completed(baseline + n)
        jobs = await self._jobs(client, tenant)
        last = max(parse_time(j["updatedAt"], "updatedAt") for j in jobs)
        drain = (last - due).total_seconds()
        delays = [(parse_time(j["claimedAt"], "c") - due).total_seconds() for j in jobs]
        print(
            f"burst drain: {n} jobs in {drain:.2f}s after the due instant = "
            f"{n / drain:.0f} jobs/s (target >= 2000)"
        )
        print("  " + _summary("pick delay after due instant", delays))

    async def _send_all(
        self, client: _Pool, bodies: list[dict[str, Any]], latencies: list[float]
    ) -> None:
        send, receive = trio.open_memory_channel[dict[str, Any]](len(bodies))
        for body in bodies:
            send.send_nowait(body)
        send.close()

        async def worker() -> None:
            async for body in receive:
                await self._post(client, body, latencies)

        async with trio.open_nursery() as nursery:
            for _ in range(self.args.concurrency):
                nursery.start_soon(worker)

    async def steady(self, client: _Pool) -> None:
        rate, duration = self.args.rate, self.args.duration
        tenant = f"bench-steady-{self.run_id}"
        total = int(rate * duration)
        latencies: list[float] = []
        late_sends = 0
        baseline = await self._completed_total()
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            for i in range(total):
                at = started + i / rate
                now = trio.current_time()
                if now < at:
                    await trio.sleep_until(at)
                elif now - at > 0.05:
                    late_sends += 1
                body = {
                    "idempotencyKey": f"{tenant}-{i}",
                    "tenantId": tenant,
                    "jobType": "noop",
                    "scheduledAt": format_time(datetime.now(UTC) + timedelta(seconds=1)),
                }
                nursery.start_soon(self._post, client, body, latencies)
        await self._wait_completed(baseline + total)
        jobs = await self._jobs(client, tenant)
        delays = [
            (parse_time(j["claimedAt"], "c") - parse_time(j["scheduledAt"], "s")).total_seconds()
            for j in jobs
        ]
        print(
            f"steady: {total} jobs at {rate:.0f}/s for {duration:.0f}s, each due 1s after "
            f"creation ({late_sends} sends >50ms behind schedule)"
        )
        print("  " + _summary("start delay (claimedAt - scheduledAt), target p99 <= 50ms", delays))
        print(
            "  "
            + _summary(f"POST /jobs latency at {rate:.0f} req/s, target p99 <= 20ms", latencies)
        )

    async def run(self) -> None:
        try:
            await self.start_dev()
            assert self.proc is not None
            await trio.sleep(3)
            print(f"dev pid {self.proc.pid}, workdir {self.workdir}")
            print(f"idle RSS: {_rss_mb(self.proc.pid):.1f} MB (target <= 150 MB)")
            client = _Pool(self.api, self.args.concurrency)
            try:
                await self.burst(client)
                await self.steady(client)
            finally:
                await client.aclose()
            print(f"RSS after load: {_rss_mb(self.proc.pid):.1f} MB")
        finally:
            with trio.CancelScope(shield=True):
                await self.stop_dev()


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="jobscheduler-bench-"))
    bench = _Bench(args, workdir)
    print(f"jobscheduler bench on {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    try:
        trio.run(bench.run)
    finally:
        if not args.keep:
            for path in sorted(workdir.rglob("*"), reverse=True):
                path.unlink() if path.is_file() else path.rmdir()
            workdir.rmdir()
    return 0
