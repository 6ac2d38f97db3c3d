"""The bench's stack under test: its ``jobscheduler`` processes, from start to cleanup.

``embedded`` is one ``jobscheduler dev`` on a temporary SQLite file; ``distributed`` is one
process per role (``run-api``, two ``run-scheduler``, ``run-executor`` for ``noop``,
``run-reaper``) on the environment's MongoDB, Kafka and etcd, in a database, topic prefix
and election of the run's own, dropped afterwards. Every process gets free ports, waits for
its ``/healthz`` before the bench goes on, and is read through its metrics listener. The
create phase's servers (:mod:`jobscheduler.tools.bench.create`) are started here too.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import attrs
import httpx
import pymongo
import trio

from jobscheduler.bus.kafka import delete_prefixed_topics
from jobscheduler.config import Settings
from jobscheduler.testing import (
    ServerProcess,
    free_port,
    insert_admin_key,
    metric_value,
    stop_all,
)

from . import create as bench_create
from .http import Connection, Pool

STARTUP_TIMEOUT = 30.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Process(ServerProcess):
    """One ``jobscheduler`` subprocess of the stack under test (or the create phase's echo
    app: ``module``), ready once its metrics listener's ``/healthz`` answers 200 -- and
    the API's (``api_port``), which a process binds after its metrics listener; read
    through the metrics listener."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        log: Path,
        *,
        module: str = "jobscheduler",
        metrics_port: int | None = None,
        api_port: str | None = None,
    ) -> None:
        self.metrics_port = metrics_port or free_port()
        ports = [str(self.metrics_port), *([api_port] if api_port else [])]
        super().__init__(
            name,
            [sys.executable, "-m", module, *argv],
            {**env, "METRICS_PORT": str(self.metrics_port)},
            log,
            health_urls=[f"http://127.0.0.1:{port}/healthz" for port in ports],
        )

    async def metrics(self) -> str:
        conn = Connection("127.0.0.1", self.metrics_port)
        try:
            _, text = await conn.request("GET", "/metrics")
        finally:
            await conn.aclose()
        return text.decode()

    async def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` that carry ``labels`` (0 if none; see
        :func:`~jobscheduler.testing.metric_value`)."""
        return metric_value(await self.metrics(), name, **labels)

    def cpu_seconds(self) -> float:
        return bench_create.cpu_seconds(self.pid) if self.proc is not None else float("nan")

    def rss_mb(self) -> float:
        return rss_mb(self.pid) if self.proc is not None else float("nan")


@attrs.frozen
class FlowServer:
    """A ``dev`` of a flow phase: where it answers, and its executor's completions."""

    url: str
    process: Process

    async def completed(self) -> float:
        return await self.process.metric("executor_jobs_processed_total", result="completed")

    async def stop(self) -> None:
        await self.process.stop()


class Stack:
    """The processes of one bench run, their environment, and the run's data."""

    def __init__(self, *, distributed: bool, auth: str, workdir: Path, settings: Settings) -> None:
        self.distributed = distributed
        self.auth = auth
        self.workdir = workdir
        self.api = f"http://127.0.0.1:{free_port()}"
        self.run_id = uuid.uuid4().hex[:8]
        self.processes: list[Process] = []
        self.settings = settings
        self.database = f"bench_{self.run_id}"
        #: The all-tenant admin key requests carry when ``auth`` is required.
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
    ) -> Process:
        # The caller's settings (SCHEDULER_TICK, ...) apply; the bench owns the rest.
        process = Process(
            name,
            argv,
            {
                **os.environ,
                **self._stack_env(),
                "LOG_LEVEL": "WARNING",
                "AUTH": self.auth,
                **env,
            },
            self.workdir / f"{name}.log",
            module=module,
            metrics_port=metrics_port,
            api_port=env.get("API_PORT"),
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

    @staticmethod
    async def _spawn_healthy(process: Process) -> None:
        process.spawn()
        async with httpx.AsyncClient() as http:
            await process.wait_ready(http, STARTUP_TIMEOUT)

    @property
    def _executor(self) -> Process:
        """The process whose metrics count completed jobs."""
        return next(p for p in self.processes if p.name in ("dev", "executor-noop"))

    @property
    def schedulers(self) -> list[Process]:
        """Every scheduler process started so far (distributed), running or not."""
        return [p for p in self.processes if p.name.startswith("scheduler")]

    async def _create_key(self, sqlite_path: Path | None = None) -> str:
        """An all-tenant admin key in the stack's (fresh) store, made before it starts
        (``sqlite_path``: in that SQLite file instead)."""
        from jobscheduler.store import JobStore

        store: JobStore
        if self.distributed and sqlite_path is None:
            from jobscheduler.store.mongo import MongoJobStore

            store = MongoJobStore(self.settings.mongo_uri, self.database)
        else:
            from jobscheduler.store.sqlite import SQLiteJobStore

            store = SQLiteJobStore(sqlite_path or self.workdir / "bench.db")
        return await insert_admin_key(store, "bench")

    async def start(self) -> None:
        """Start the stack's processes and wait until each is healthy (and, distributed,
        until a scheduler leads)."""
        if self.auth == "required":
            self.key = await self._create_key()
        api_port = self.api.rsplit(":", 1)[1]
        if self.distributed:
            self._process("api", ["run-api"], API_PORT=api_port)
            self._process("scheduler-1", ["run-scheduler"])
            self._process("scheduler-2", ["run-scheduler"])
            self._process("executor-noop", ["run-executor"], JOB_TYPE="noop")
            self._process("reaper", ["run-reaper"])
        else:
            # The bench's app adds the workflows phase's fan-out step to the built-ins.
            self._process(
                "dev", ["dev"], API_PORT=api_port, JOBSCHEDULER_APP=f"{__package__}.fanout_app"
            )
        for process in self.processes:
            process.spawn()
        async with httpx.AsyncClient() as http:
            for process in self.processes:
                await process.wait_ready(http, STARTUP_TIMEOUT)
        if self.distributed:
            with trio.fail_after(STARTUP_TIMEOUT):
                await self.leader()

    async def add_scheduler(self) -> Process:
        """One more ``run-scheduler`` (distributed), started and healthy."""
        standby = self._process(f"scheduler-{len(self.schedulers) + 1}", ["run-scheduler"])
        await self._spawn_healthy(standby)
        return standby

    async def start_server(
        self, name: str, *, echo: bool = False, auth: str = "off"
    ) -> bench_create.Server:
        """A fresh server of the create phase: the echo app, or a ``dev`` on its own SQLite
        file with ``auth`` (and an admin key when required), at the default LOG_LEVEL."""
        port = free_port()
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
        await self._spawn_healthy(process)
        return bench_create.Server(
            url=f"http://127.0.0.1:{port}", pid=process.pid, key=key, stop=process.stop
        )

    async def start_flow_server(self, name: str, *, flow: bool) -> FlowServer:
        """A fresh ``dev`` on its own SQLite file with FLOW_CONTROL on or off (the flow
        phases' comparisons)."""
        port = free_port()
        process = self._process(
            name,
            ["dev"],
            SQLITE_PATH=str(self.workdir / f"{name}.db"),
            API_PORT=str(port),
            AUTH="off",
            FLOW_CONTROL="1" if flow else "0",
        )
        await self._spawn_healthy(process)
        return FlowServer(url=f"http://127.0.0.1:{port}", process=process)

    def pool(self, url: str, size: int, key: str | None) -> Pool:
        return Pool(url, size, key)

    async def stop(self) -> None:
        """Stop every process (saying which did not stop cleanly); distributed, drop the
        run's database and topics."""
        for problem in await stop_all(self.processes):
            print(f"jobscheduler bench: {problem} (logs in {self.workdir})", file=sys.stderr)
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

    async def leader(self, among: list[Process] | None = None) -> Process:
        """The scheduler reporting ``scheduler_is_leader 1``, polled every 10 ms until one
        does (callers bound the wait)."""
        candidates = among if among is not None else self.schedulers
        while True:
            for scheduler in candidates:
                if scheduler.running() and await scheduler.metric("scheduler_is_leader") == 1:
                    return scheduler
            await trio.sleep(0.01)

    async def completed_total(self) -> float:
        """Jobs completed so far, from the executor's metrics listener: cheap to poll, unlike
        listing thousands of jobs through the API, which would steal the loop being measured."""
        return await self._executor.metric("executor_jobs_processed_total", result="completed")

    def cpu_seconds(self) -> float:
        """CPU time so far of the stack's running processes, together."""
        return sum(p.cpu_seconds() for p in self.processes if p.running())
