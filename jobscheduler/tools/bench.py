"""``jobscheduler bench``: the performance targets, measured through the public HTTP API.

``--stack embedded`` (the default) starts a fresh ``jobscheduler dev`` subprocess on a
temporary SQLite file and free ports. ``--stack distributed`` starts one process per role
(``run-api``, two ``run-scheduler``, ``run-executor`` for ``noop``, ``run-reaper``) on the
MongoDB, Kafka and etcd of the environment (``just deps-up``), in a fresh database and
election. Either way it measures, printing figures (never asserting them — machines are
shared and noisy):

1. idle RSS of the processes;
2. burst drain: N ``noop`` jobs all due at one instant; drain rate = N / (last completion -
   due instant), from the jobs' own ``updatedAt``;
3. steady load: R jobs/s for D seconds, each due 1 s after creation; start delay
   (``claimedAt - scheduledAt``) percentiles and ``POST /jobs`` latency percentiles;
   then timer precision (W3 of issue 13): 200 jobs at 20/s, each due 1 s after creation,
   start delay percentiles;
4. enqueue+drain: 20,000 due ``noop`` jobs sent in batches of 1,000 through
   ``POST /jobs/batch``, then as many through one ``POST /jobs`` each; the rate from the
   first request to the last completion (:mod:`jobscheduler.tools.bench_enqueue`);
5. distributed only: failover, the time from SIGKILL (then SIGTERM) of the leading scheduler
   until the standby reports ``scheduler_is_leader 1``.

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
import pymongo
import trio

from ..bus.kafka import delete_prefixed_topics
from ..config import Settings, parse_duration
from ..errors import ConfigError
from ..model import format_time, parse_time
from . import bench_create, bench_enqueue
from .stats import format_seconds, percentiles

PCTS = (50, 95, 99)
#: Workload W3 of issue 13 (timer precision): jobs, and creations per second.
W3_JOBS = 200
W3_RATE = 20.0
STARTUP_TIMEOUT = 30.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stack",
        choices=("embedded", "distributed"),
        default="embedded",
        help="`dev` on SQLite (default), or one process per role on MongoDB/Kafka/etcd",
    )
    parser.add_argument("--burst", type=int, default=5000, help="jobs in the burst (5000)")
    parser.add_argument("--rate", type=float, help="steady jobs/s (200 embedded, 50 distributed)")
    parser.add_argument(
        "--duration", type=parse_duration, default=20.0, help="steady phase length (20s)"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="HTTP connections (32)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (database, log)"
    )
    parser.add_argument(
        "--auth",
        choices=("off", "required"),
        default="off",
        help="AUTH of the stack; with required, requests carry an all-tenant admin key (off)",
    )
    bench_enqueue.configure(parser)
    bench_create.configure(parser)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _load() -> str:
    """The 1-minute load average, printed beside timings (the machine may be shared)."""
    return f"load average {os.getloadavg()[0]:.1f}"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class _Connection:
    """One keep-alive HTTP/1.1 connection: a request, then its full response, in turn."""

    def __init__(self, host: str, port: int, headers: str = "") -> None:
        self._host, self._port = host, port
        #: Extra header lines (``Name: value\r\n`` each), e.g. the Authorization.
        self._headers = headers
        self._stream: trio.SocketStream | None = None
        self._buffer = b""

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self._stream is None:
            self._stream = await trio.open_tcp_stream(self._host, self._port)
            self._buffer = b""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"{self._headers}\r\n"
        )
        await self._stream.send_all(head.encode() + body)
        while b"\r\n\r\n" not in self._buffer:
            await self._receive()
        header, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length, close = 0, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection":
                close = value.strip().lower() == "close"
        while len(self._buffer) < length:
            await self._receive()
        payload, self._buffer = self._buffer[:length], self._buffer[length:]
        if close:
            # hypercorn ends a keep-alive connection after 1,000 requests (its
            # keep_alive_max_requests), saying so here; the next request opens a new one.
            await self.aclose()
        return status, payload

    async def _receive(self) -> None:
        assert self._stream is not None
        data = await self._stream.receive_some(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        self._buffer += data

    async def aclose(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.aclose()


class _Pool:
    """A fixed number of connections handed out one request at a time."""

    def __init__(self, url: str, size: int, key: str | None = None) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self._send, self._receive = trio.open_memory_channel[_Connection](size)
        headers = f"Authorization: Bearer {key}\r\n" if key else ""
        self._all = [_Connection(host, int(port), headers) for _ in range(size)]
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


class _Process:
    """One ``jobscheduler`` subprocess of the stack under test, with its metrics port."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        log: Path,
        *,
        module: str = "jobscheduler",
        metrics_port: int | None = None,
    ) -> None:
        self.name = name
        self.metrics_port = metrics_port or _free_port()
        self._module = module
        self._argv = argv
        self._env = {**env, "METRICS_PORT": str(self.metrics_port)}
        self._log = log
        self.proc: trio.Process | None = None

    async def spawn(self) -> None:
        with self._log.open("wb") as log:
            self.proc = await trio.lowlevel.open_process(
                [sys.executable, "-m", self._module, *self._argv],
                env=self._env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    async def wait_healthy(self, client: httpx.AsyncClient) -> None:
        url = f"http://127.0.0.1:{self.metrics_port}/healthz"
        with trio.fail_after(STARTUP_TIMEOUT):
            while True:
                if self.proc is not None and self.proc.returncode is not None:
                    raise RuntimeError(f"{self.name} exited; see {self._log}")
                try:
                    if (await client.get(url)).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await trio.sleep(0.05)

    async def metrics(self) -> str:
        conn = _Connection("127.0.0.1", self.metrics_port)
        try:
            _, text = await conn.request("GET", "/metrics")
        finally:
            await conn.aclose()
        return text.decode()

    async def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` that carry ``labels`` (0 if none)."""
        wanted = [f'{key}="{value}"' for key, value in labels.items()]
        total = 0.0
        for line in (await self.metrics()).splitlines():
            sample = line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " ")
            if sample and all(label in line for label in wanted):
                total += float(line.rsplit(" ", 1)[1])
        return total

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def cpu_seconds(self) -> float:
        return bench_create.cpu_seconds(self.proc.pid) if self.proc is not None else float("nan")

    def rss_mb(self) -> float:
        return _rss_mb(self.proc.pid) if self.proc is not None else float("nan")

    async def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(sig)
        with trio.move_on_after(20):
            await self.proc.wait()
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


class _Bench:
    def __init__(self, args: argparse.Namespace, workdir: Path, settings: Settings) -> None:
        self.args = args
        self.workdir = workdir
        self.distributed = args.stack == "distributed"
        self.api = f"http://127.0.0.1:{_free_port()}"
        self.run_id = uuid.uuid4().hex[:8]
        self.processes: list[_Process] = []
        self.settings = settings
        self.database = f"bench_{self.run_id}"
        self.key: str | None = None
        self.topic_prefix = f"{settings.kafka_topic_prefix}bench-{self.run_id}."

    def _process(
        self,
        name: str,
        argv: list[str],
        *,
        module: str = "jobscheduler",
        metrics_port: int | None = None,
        **env: str,
    ) -> _Process:
        # The caller's settings (SCHEDULER_TICK, ...) apply; the bench owns the rest.
        process = _Process(
            name,
            argv,
            {
                **os.environ,
                **self._stack_env(),
                "LOG_LEVEL": "WARNING",
                "AUTH": self.args.auth,
                **env,
            },
            self.workdir / f"{name}.log",
            module=module,
            metrics_port=metrics_port,
        )
        self.processes.append(process)
        return process

    def _stack_env(self) -> dict[str, str]:
        if not self.distributed:
            return {"SQLITE_PATH": str(self.workdir / "bench.db")}
        s = self.settings
        return {
            "MONGO_URI": s.mongo_uri,
            "MONGO_DB": self.database,
            "KAFKA_BROKERS": s.kafka_brokers,
            "KAFKA_TOPIC_PREFIX": self.topic_prefix,
            "ETCD_ENDPOINTS": ",".join(s.etcd_endpoints),
            "ELECTION_NAME": f"jobscheduler-bench/{self.run_id}",
        }

    @property
    def _executor(self) -> _Process:
        """The process whose metrics count completed jobs."""
        return next(p for p in self.processes if p.name in ("dev", "executor-noop"))

    @property
    def _schedulers(self) -> list[_Process]:
        return [p for p in self.processes if p.name.startswith("scheduler")]

    async def _create_key(self, sqlite_path: Path | None = None) -> str:
        """An all-tenant admin key in the stack's (fresh) store, made before it starts
        (``sqlite_path``: in that SQLite file instead)."""
        from ..auth import Role
        from ..keys import new_key
        from ..store import JobStore

        record, token = new_key(tenant=None, role=Role.ADMIN, name="bench", now=datetime.now(UTC))
        store: JobStore
        if self.distributed and sqlite_path is None:
            from ..store.mongo import MongoJobStore

            store = MongoJobStore(self.settings.mongo_uri, self.database)
        else:
            from ..store.sqlite import SQLiteJobStore

            store = SQLiteJobStore(sqlite_path or self.workdir / "bench.db")
        await store.start()
        try:
            await store.insert_key(record)
        finally:
            await store.close()
        return token

    async def start_stack(self) -> None:
        if self.args.auth == "required":
            self.key = await self._create_key()
        api_port = self.api.rsplit(":", 1)[1]
        if self.distributed:
            self._process("api", ["run-api"], API_PORT=api_port)
            self._process("scheduler-1", ["run-scheduler"])
            self._process("scheduler-2", ["run-scheduler"])
            self._process("executor-noop", ["run-executor"], JOB_TYPE="noop")
            self._process("reaper", ["run-reaper"])
        else:
            self._process("dev", ["dev"], API_PORT=api_port)
        for process in self.processes:
            await process.spawn()
        async with httpx.AsyncClient() as client:
            for process in self.processes:
                await process.wait_healthy(client)
        if self.distributed:
            with trio.fail_after(STARTUP_TIMEOUT):
                await self._leader()

    async def start_server(
        self, name: str, *, echo: bool = False, auth: str = "off"
    ) -> bench_create.Server:
        """A fresh server of the create phase: the echo app, or a ``dev`` on its own SQLite
        file with ``auth`` (and an admin key when required), at the default LOG_LEVEL."""
        port = _free_port()
        key: str | None = None
        if echo:
            process = self._process(
                name, ["--port", str(port)], module=bench_create.ECHO_MODULE, metrics_port=port
            )
        else:
            db = self.workdir / f"{name}.db"
            if auth == "required":
                key = await self._create_key(db)
            process = self._process(
                name, ["dev"], SQLITE_PATH=str(db), API_PORT=str(port), AUTH=auth, LOG_LEVEL="INFO"
            )
        await process.spawn()
        async with httpx.AsyncClient() as client:
            await process.wait_healthy(client)
        assert process.proc is not None
        return bench_create.Server(
            url=f"http://127.0.0.1:{port}", pid=process.proc.pid, key=key, stop=process.stop
        )

    def pool(self, url: str, size: int, key: str | None) -> _Pool:
        return _Pool(url, size, key)

    async def stop_stack(self) -> None:
        for process in self.processes:
            await process.stop()
        if self.distributed:
            await trio.to_thread.run_sync(self._drop_run_data)

    def _drop_run_data(self) -> None:
        """Drop this run's database and Kafka topics."""
        client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
            self.settings.mongo_uri, serverSelectionTimeoutMS=5000
        )
        try:
            client.drop_database(self.database)
        finally:
            client.close()
        delete_prefixed_topics(self.settings.kafka_brokers, self.topic_prefix)

    async def _leader(self, among: list[_Process] | None = None) -> _Process:
        """The scheduler reporting ``scheduler_is_leader 1``, polled every 10 ms until one
        does (callers bound the wait)."""
        candidates = among if among is not None else self._schedulers
        while True:
            for scheduler in candidates:
                if scheduler.running and await scheduler.metric("scheduler_is_leader") == 1:
                    return scheduler
            await trio.sleep(0.01)

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
        """Jobs completed so far, from the executor's metrics listener: cheap to poll, unlike
        listing thousands of jobs through the API, which would steal the loop being measured."""
        return await self._executor.metric("executor_jobs_processed_total", result="completed")

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
        # The stack's processes (a phase's own servers, e.g. the create phase's, are gone).
        live = [p for p in self.processes if p.running]
        roles = [(p.name, p.proc.pid, p.metrics) for p in live if p.proc]
        if self.distributed:  # psutil comes with the dev extras: imported only here
            from . import bench_distributed
        # CPU of the stack from just before the due instant to the last completion.
        await trio.sleep(max((due - datetime.now(UTC)).total_seconds() - 0.2, 0.0))
        cpu_before = sum(p.cpu_seconds() for p in live)
        costs = await bench_distributed.sample(roles) if self.distributed else {}
        await self._wait_completed(baseline + n)
        cpu = sum(p.cpu_seconds() for p in live) - cpu_before
        if self.distributed:
            drained = await bench_distributed.sample(roles)
            print("burst drain cost per role (store commands, CPU):")
            print("\n".join(bench_distributed.report(costs, drained, n)))
        jobs = await self._jobs(client, tenant)
        last = max(parse_time(j["updatedAt"], "updatedAt") for j in jobs)
        drain = (last - due).total_seconds()
        delays = [(parse_time(j["claimedAt"], "c") - due).total_seconds() for j in jobs]
        print(
            f"burst drain: {n} jobs in {drain:.2f}s after the due instant = "
            f"{n / drain:.0f} jobs/s (target >= {300 if self.distributed else 4000}; {_load()})"
        )
        print(f"  CPU of the stack while draining: {cpu / n * 1e6:.0f} us per job")
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

    async def _paced(
        self, client: _Pool, name: str, rate: float, total: int
    ) -> tuple[list[float], list[float], int]:
        """Create ``total`` noop jobs at ``rate`` per second, each due 1 s after its creation,
        and wait for them all to complete. Returns the start delays (``claimedAt -
        scheduledAt``), the ``POST /jobs`` latencies, and how many sends ran >50 ms late."""
        tenant = f"bench-{name}-{self.run_id}"
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
        return delays, latencies, late_sends

    async def steady(self, client: _Pool) -> None:
        rate = self.args.rate or (50.0 if self.distributed else 200.0)
        duration = self.args.duration
        total = int(rate * duration)
        delays, latencies, late_sends = await self._paced(client, "steady", rate, total)
        print(
            f"steady: {total} jobs at {rate:.0f}/s for {duration:.0f}s, each due 1s after "
            f"creation ({late_sends} sends >50ms behind schedule)"
        )
        if self.distributed:
            tick_ms = self.settings.scheduler_tick * 1000
            delay_target = f"p99 <= tick + 250ms = {tick_ms + 250:.0f}ms"
            post_target = ""
        else:
            delay_target, post_target = "p99 <= 50ms", ", target p99 <= 20ms"
        label = f"start delay (claimedAt - scheduledAt), target {delay_target}"
        print("  " + _summary(label, delays))
        print("  " + _summary(f"POST /jobs latency at {rate:.0f} req/s{post_target}", latencies))

    async def timer(self, client: _Pool) -> None:
        """W3 of issue 13: 200 jobs paced at 20/s, each due 1 s after creation; the start
        delay shows how precisely the scheduler wakes for a due job (not on a tick)."""
        delays, _, late_sends = await self._paced(client, "timer", W3_RATE, W3_JOBS)
        target = "" if self.distributed else ", target p99 <= 10ms"
        print(
            f"timer (W3): {W3_JOBS} jobs at {W3_RATE:.0f}/s, each due 1s after creation "
            f"({late_sends} sends >50ms behind schedule)"
        )
        print("  " + _summary(f"start delay (claimedAt - scheduledAt){target}", delays))
        print(f"  ({_load()})")

    async def failover(self) -> None:
        """SIGKILL the leader and time the standby's takeover; then, with a new standby,
        SIGTERM the leader and time it again."""
        ttl = self.settings.election_ttl
        for sig, target in ((signal.SIGKILL, f"TTL {ttl}s + 2s"), (signal.SIGTERM, "1s")):
            with trio.fail_after(STARTUP_TIMEOUT):
                leader = await self._leader()
            standbys = [p for p in self._schedulers if p is not leader and p.running]
            if not standbys:
                name = f"scheduler-{len(self._schedulers) + 1}"
                standby = self._process(name, ["run-scheduler"])
                await standby.spawn()
                async with httpx.AsyncClient() as client:
                    await standby.wait_healthy(client)
                standbys = [standby]
            assert leader.proc is not None
            signalled = time.perf_counter()
            leader.proc.send_signal(sig)
            with trio.fail_after(ttl + STARTUP_TIMEOUT):
                successor = await self._leader(standbys)
            took = time.perf_counter() - signalled
            print(
                f"failover after {signal.Signals(sig).name} of {leader.name}: {successor.name} "
                f"leads {took:.2f}s later (target < {target})"
            )
            await leader.stop()

    async def run(self) -> None:
        try:
            await self.start_stack()
            await trio.sleep(3)
            print(f"stack: {self.args.stack}, workdir {self.workdir}")
            for process in self.processes:
                print(f"idle RSS of {process.name}: {process.rss_mb():.1f} MB (target <= 150 MB)")
            print(f"auth: {self.args.auth}")
            client = _Pool(self.api, self.args.concurrency, self.key)
            phases = {p.strip() for p in self.args.phases.split(",")}
            try:
                if "create" in phases:
                    await bench_create.create_phase(self, self.args, self.run_id)
                if "burst" in phases:
                    await self.burst(client)
                if "steady" in phases:
                    await self.steady(client)
                if "timer" in phases:
                    await self.timer(client)
                if "enqueue" in phases:
                    await bench_enqueue.enqueue_drain(
                        client,
                        self._completed_total,
                        self.args,
                        self.run_id,
                        lambda: sum(p.cpu_seconds() for p in self.processes if p.running),
                    )
            finally:
                await client.aclose()
            for process in self.processes:
                if process.running:  # the create phase's servers are stopped by then
                    print(f"RSS of {process.name} after load: {process.rss_mb():.1f} MB")
            if self.distributed:
                await self.failover()
        finally:
            with trio.CancelScope(shield=True):
                await self.stop_stack()


def run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"jobscheduler bench: configuration error: {exc}", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="jobscheduler-bench-"))
    bench = _Bench(args, workdir, settings)
    print(f"jobscheduler bench on {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    try:
        trio.run(bench.run)
    finally:
        if not args.keep:
            for path in sorted(workdir.rglob("*"), reverse=True):
                path.unlink() if path.is_file() else path.rmdir()
            workdir.rmdir()
    return 0
