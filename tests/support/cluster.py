"""Role processes on the real servers: ``jobscheduler run-<role>`` subprocesses per test.

The one process supervisor of the integration and fault-injection suites. Each test gets a
:class:`Cluster`: its own MongoDB database and Kafka topic prefix (both
dropped afterwards), its own etcd election name, and one subprocess per started role, each
with unique ``WORKER_ID`` and free ``API_PORT``/``METRICS_PORT``, logging at DEBUG to a file
under ``tmp_path``. At teardown every process gets SIGTERM (unless the test already
signalled it) and must exit 0; a process the test SIGKILLed is exempt, and one that exited
without being signalled is a failure. When a test fails, the tail of every process's log is
attached to its report.

With its own ``KAFKA_TOPIC_PREFIX``, a test's executors never see an earlier test's
wake-ups. (They would be harmless -- unknown to this database, so the pick loses -- but an
executor behind thousands of them, left by a test that dispatched without executing, starts
its own work seconds late.)

The servers are a :class:`Servers`: by default (``Servers.from_env()``, the shared
``scripts/deps.sh up`` ones) MONGO_URI, KAFKA_BROKERS and ETCD_ENDPOINTS from the
environment, defaulting to 127.0.0.1; the fault suite passes its private instances. Nothing
here skips: an unreachable server fails.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import grpc
import httpx
import pymongo
import pytest
import trio

from jobscheduler._etcdpb import rpc_pb2, rpc_pb2_grpc, v3election_pb2, v3election_pb2_grpc
from jobscheduler.auth import Role
from jobscheduler.bus.kafka import delete_prefixed_topics
from jobscheduler.config import ENVIRONMENT_VARIABLES
from jobscheduler.keys import new_key
from jobscheduler.store.mongo_tenancy import KEYS_COLLECTION, key_to_document
from tests.support.ports import free_port

DEFAULT_MONGO_URI = "mongodb://127.0.0.1:27017"
DEFAULT_KAFKA_BROKERS = "127.0.0.1:9092"
DEFAULT_ETCD_ENDPOINTS = "127.0.0.1:2379"

#: Bound on a role process becoming ready (interpreter start, imports, connections).
STARTUP_TIMEOUT = 45.0
#: Bound on a role process exiting after SIGTERM (executors get SHUTDOWN_GRACE first).
STOP_TIMEOUT = 30.0
#: Log lines printed per process when a test fails.
TAIL_LINES = 60

ROLES = ("api", "scheduler", "executor", "reaper")
#: Log lines left out of a tail: pymongo's DEBUG chatter and one-per-job routine events.
_ROUTINE = re.compile(r"logger=pymongo\.|^\S+ (?:info|debug)\s+job (?:created|completed) ")


def mongo_uri() -> str:
    return os.environ.get("MONGO_URI") or DEFAULT_MONGO_URI


def kafka_brokers() -> str:
    return os.environ.get("KAFKA_BROKERS") or DEFAULT_KAFKA_BROKERS


def etcd_endpoint() -> str:
    endpoints = os.environ.get("ETCD_ENDPOINTS") or DEFAULT_ETCD_ENDPOINTS
    return endpoints.split(",")[0].strip().removeprefix("http://")


@attrs.frozen(kw_only=True)
class Servers:
    """Where a cluster's roles find MongoDB, Kafka and etcd."""

    mongo_uri: str
    kafka_brokers: str
    etcd_endpoint: str

    @classmethod
    def from_env(cls) -> Servers:
        return cls(
            mongo_uri=mongo_uri(), kafka_brokers=kafka_brokers(), etcd_endpoint=etcd_endpoint()
        )


def parse_time(text: str) -> datetime:
    """An RFC3339 time of the API (``...Z``) as an aware UTC datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)


def utc_now() -> datetime:
    return datetime.now(UTC)


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The first sample of ``name`` whose labels include ``labels``, or None."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None or match.group(1) != name:
            continue
        got = dict(_LABEL.findall(match.group(2) or ""))
        if all(got.get(key) == value for key, value in labels.items()):
            return float(match.group(3))
    return None


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

    async def metric(self, http: httpx.AsyncClient, name: str, **labels: str) -> float | None:
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


class EtcdAdmin:
    """An out-of-band etcd client: the election's current leader and lease revocation."""

    def __init__(self, endpoint: str) -> None:
        self._channel = grpc.insecure_channel(endpoint)
        self._election = v3election_pb2_grpc.ElectionStub(self._channel)
        self._lease = rpc_pb2_grpc.LeaseStub(self._channel)

    async def leader(self, election: str) -> tuple[bytes, int, bytes] | None:
        """(key, lease id, value) of the election's leader, or None when there is none."""

        def call() -> Any:
            return self._election.Leader(
                v3election_pb2.LeaderRequest(name=election.encode()), timeout=3.0
            )

        try:
            response = await trio.to_thread.run_sync(call)
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.UNKNOWN and "no leader" in (exc.details() or ""):
                return None
            raise
        kv = response.kv
        return bytes(kv.key), int(kv.lease), bytes(kv.value)

    async def revoke(self, lease_id: int) -> None:
        await trio.to_thread.run_sync(
            lambda: self._lease.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=lease_id), timeout=3.0)
        )

    def close(self) -> None:
        self._channel.close()


class Cluster:
    """The role processes, database and election of one test."""

    def __init__(
        self,
        tmp_path: Path,
        http: httpx.AsyncClient,
        servers: Servers | None = None,
        role_env: Mapping[str, str] | None = None,
    ) -> None:
        """``role_env``: settings for every role process (a role's own ``env`` wins)."""
        suffix = uuid.uuid4().hex[:12]
        self.tmp_path = tmp_path
        self.http = http
        self.suffix = suffix
        self.servers = servers or Servers.from_env()
        self.role_env = dict(role_env or {})
        self.mongo_uri = self.servers.mongo_uri
        self.db_name = f"js_it_{suffix}"
        self.election_name = f"jobscheduler-it/{suffix}"
        self.topic_prefix = f"it-{suffix}."
        self.tenant = f"tenant-it-{suffix}"
        self.processes: list[RoleProcess] = []
        self._counter = 0
        self._mongo: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
            self.mongo_uri, tz_aware=True, tzinfo=UTC, serverSelectionTimeoutMS=5000
        )
        self._keys = iter(range(1_000_000))
        # The API roles run with AUTH=required (their default): an all-tenant admin key in
        # this test's database, sent with every request of the shared client.
        key, self.api_key = new_key(tenant=None, role=Role.ADMIN, name="cluster", now=utc_now())
        self._mongo[self.db_name][KEYS_COLLECTION].insert_one(key_to_document(key))
        http.headers["Authorization"] = f"Bearer {self.api_key}"

    # -- processes ----------------------------------------------------------------------

    def base_env(self) -> dict[str, str]:
        """The parent's environment without any jobscheduler setting, plus this test's."""
        env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
        env.update(
            MONGO_URI=self.mongo_uri,
            MONGO_DB=self.db_name,
            KAFKA_BROKERS=self.servers.kafka_brokers,
            KAFKA_TOPIC_PREFIX=self.topic_prefix,
            ETCD_ENDPOINTS=self.servers.etcd_endpoint,
            ELECTION_NAME=self.election_name,
            METRICS_HOST="127.0.0.1",
            API_HOST="127.0.0.1",
            AUTH="required",
            LOG_LEVEL="DEBUG",
            PYTHONUNBUFFERED="1",
        )
        env.update(self.role_env)
        return env

    def prepare(self, role: str, **env: str) -> RoleProcess:
        """A not-yet-started process of ``role`` (``env`` overrides the defaults)."""
        assert role in ROLES, role
        self._counter += 1
        label = env.get("JOB_TYPE", "")
        name = f"{role}{'-' + label if label else ''}-{self._counter}"
        full_env = self.base_env()
        full_env.update(
            WORKER_ID=f"{name}-{self.suffix}",
            API_PORT=str(free_port()),
            METRICS_PORT=str(free_port()),
        )
        full_env.update(env)
        process = RoleProcess(role, name, full_env, self.tmp_path / f"{name}.log")
        self.processes.append(process)
        return process

    async def start(self, role: str, **env: str) -> RoleProcess:
        """Start one role process and wait until it is ready."""
        (process,) = await self.start_all((role, env))
        return process

    async def start_all(self, *specs: tuple[str, Mapping[str, str]]) -> list[RoleProcess]:
        """Start several role processes at once; returns them once all are ready."""
        processes = [self.prepare(role, **env) for role, env in specs]
        for process in processes:
            process.spawn()
        async with trio.open_nursery() as nursery:
            for process in processes:
                nursery.start_soon(process.wait_ready, self.http)
        return processes

    def assert_alive(self) -> None:
        """Fail at once if a role process ended without the test asking it to."""
        for process in self.processes:
            if process.exited_on_its_own():
                assert process.proc is not None
                raise AssertionError(
                    f"{process.name} exited on its own with code {process.proc.returncode}, "
                    f"without being signalled:\n{process.tail()}"
                )

    async def leader(
        self, schedulers: list[RoleProcess], timeout: float = 30.0
    ) -> tuple[RoleProcess, list[RoleProcess]]:
        """Wait until exactly one of ``schedulers`` reports ``scheduler_is_leader 1.0``;
        returns (leader, the others)."""
        leading: list[RoleProcess] = []
        try:
            with trio.fail_after(timeout):
                while True:
                    self.assert_alive()
                    leading = [s for s in schedulers if await s.is_leader(self.http)]
                    if len(leading) == 1:
                        return leading[0], [s for s in schedulers if s is not leading[0]]
                    await trio.sleep(0.05)
        except trio.TooSlowError:
            tails = "\n\n".join(f"== {s.name}\n{s.tail()}" for s in schedulers)
            raise AssertionError(
                f"no single scheduler leader within {timeout}s (leading: {leading}):\n{tails}"
            ) from None

    # -- jobs over HTTP -----------------------------------------------------------------

    def job_body(self, **fields: Any) -> dict[str, Any]:
        """A create request for this test's tenant (a field given as None is left out)."""
        body: dict[str, Any] = {
            "idempotencyKey": f"it-{self.suffix}-{next(self._keys)}",
            "tenantId": self.tenant,
            "jobType": "noop",
            "scheduledAt": "2020-01-01T00:00:00Z",
        }
        body.update(fields)
        return {key: value for key, value in body.items() if value is not None}

    async def create_job(self, api: RoleProcess, **fields: Any) -> dict[str, Any]:
        response = await self.http.post(f"{api.url}/jobs", json=self.job_body(**fields))
        assert response.status_code == 201, response.text
        job: dict[str, Any] = response.json()
        return job

    async def get_job(self, api: RoleProcess, job_id: str) -> dict[str, Any]:
        """GET /jobs/{id} (after checking that no role process died unasked)."""
        self.assert_alive()
        response = await self.http.get(f"{api.url}/jobs/{job_id}")
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        return job

    async def wait_job(
        self,
        api: RoleProcess,
        job_id: str,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 30.0,
        interval: float = 0.05,
    ) -> dict[str, Any]:
        """Poll GET /jobs/{id} until ``predicate(job)``; fail with the last state seen."""
        last: dict[str, Any] = {}
        try:
            with trio.fail_after(timeout):
                while True:
                    last = await self.get_job(api, job_id)
                    if predicate(last):
                        return last
                    await trio.sleep(interval)
        except trio.TooSlowError:
            raise AssertionError(
                f"job {job_id} never satisfied the condition within {timeout}s; "
                f"last state: {json.dumps(last)}"
            ) from None

    # -- the database directly ----------------------------------------------------------

    @property
    def jobs(self) -> pymongo.collection.Collection[dict[str, Any]]:
        return self._mongo[self.db_name]["jobs"]

    async def db(self, fn: Callable[[pymongo.collection.Collection[dict[str, Any]]], Any]) -> Any:
        """Run ``fn(jobs collection)`` in a worker thread."""
        return await trio.to_thread.run_sync(fn, self.jobs)

    # -- teardown -----------------------------------------------------------------------

    async def shutdown(self) -> list[str]:
        """SIGTERM every process still running (all at once) and wait for them; returns a
        problem line per process that did not exit 0."""
        problems: list[str] = []

        async def stop(process: RoleProcess) -> None:
            if process.exited_on_its_own():
                assert process.proc is not None
                problems.append(
                    f"{process.name} had exited on its own with code {process.proc.returncode}"
                )
                return
            if process.proc is None or process.killed:
                return
            try:
                code = await process.stop()
            except AssertionError as exc:
                problems.append(str(exc).splitlines()[0])
                return
            if code != 0:
                problems.append(f"{process.name} exited {code} on SIGTERM")

        async with trio.open_nursery() as nursery:
            for process in self.processes:
                nursery.start_soon(stop, process)
        return problems

    def close(self) -> None:
        try:
            self._mongo.drop_database(self.db_name)
        finally:
            self._mongo.close()
            delete_prefixed_topics(self.servers.kafka_brokers, self.topic_prefix)

    def tails(self) -> str:
        return "\n\n".join(
            f"===== {p.name} ({p.worker_id}) log tail: {p.log_path}\n{p.tail()}"
            for p in self.processes
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the role processes' log tails to the report of a failed test (import this
    hook into a conftest that uses :func:`open_cluster`).

    (pytest-trio tears trio fixtures down inside the call phase, so the fixture itself
    cannot know the outcome; the hook sees it.)
    """
    report: pytest.TestReport = yield
    cluster = getattr(item, "_role_cluster", None)
    if report.failed and cluster is not None:
        report.sections.append(("role process logs (tails)", cluster.tails()))
        item._role_cluster = None  # type: ignore[attr-defined]
    return report


@asynccontextmanager
async def open_cluster(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    servers: Servers | None = None,
    role_env: Mapping[str, str] | None = None,
) -> AsyncIterator[Cluster]:
    """A test's cluster; on exit every process is stopped (each must exit 0) and the
    database and topics are dropped."""
    async with httpx.AsyncClient(timeout=10.0) as http:
        cluster = Cluster(tmp_path, http, servers, role_env)
        request.node._role_cluster = cluster
        problems: list[str] = []
        try:
            yield cluster
        finally:
            with trio.CancelScope(shield=True):
                problems = await cluster.shutdown()
                await trio.to_thread.run_sync(cluster.close)
        assert not problems, "role processes did not stop cleanly: " + "; ".join(problems)
