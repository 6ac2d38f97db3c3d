"""Role processes on the real servers: ``jobscheduler run-<role>`` subprocesses per test.

The integration and fault-injection suites' cluster, on the process supervisor that every
suite and the bench share (:class:`jobscheduler.testing.ServerProcess`). Each test gets a
:class:`Cluster`: its own MongoDB database and Kafka topic prefix (both dropped afterwards),
its own etcd election name, and one subprocess per started role, each with unique
``WORKER_ID`` and free ``API_PORT``/``METRICS_PORT``, logging at DEBUG to a file under
``tmp_path``. At teardown every process gets SIGTERM (unless the test already signalled it)
and must exit 0; a process the test SIGKILLed is exempt, and one that exited without being
signalled is a failure. When a test fails, the tail of every process's log is attached to
its report.

With its own ``KAFKA_TOPIC_PREFIX``, a test's executors never see an earlier test's
wake-ups. (They would be harmless -- unknown to this database, so the pick loses -- but an
executor behind thousands of them, left by a test that dispatched without executing, starts
its own work seconds late.)

The servers are a :class:`Servers` (tests/support/endpoints.py): by default the shared
``scripts/deps.sh up`` ones, the fault suite passes its private instances. Nothing here
skips: an unreachable server fails.

This module is the cluster's import point: it re-exports the public names of the parts
it is built from, ``role_process.py`` (one role subprocess), ``endpoints.py`` (where the
servers are) and ``etcd_admin.py`` (an out-of-band etcd client), all in tests/support.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pymongo
import pytest
import trio

from jobscheduler.bus.kafka import delete_prefixed_topics
from jobscheduler.config import ENVIRONMENT_VARIABLES
from jobscheduler.domain.keys import Role, new_key
from jobscheduler.domain.model import Job, new_job_id, utc
from jobscheduler.store.mongo.store import job_to_document
from jobscheduler.store.mongo.tenancy import KEYS_COLLECTION, key_to_document
from jobscheduler.testing import free_port, stop_all
from jobscheduler.testing import metric_value as metric_value
from tests.support.endpoints import DEFAULT_ETCD_ENDPOINTS as DEFAULT_ETCD_ENDPOINTS
from tests.support.endpoints import DEFAULT_KAFKA_BROKERS as DEFAULT_KAFKA_BROKERS
from tests.support.endpoints import DEFAULT_MONGO_URI as DEFAULT_MONGO_URI
from tests.support.endpoints import Servers as Servers
from tests.support.endpoints import etcd_endpoint as etcd_endpoint
from tests.support.endpoints import kafka_brokers as kafka_brokers
from tests.support.endpoints import mongo_uri as mongo_uri
from tests.support.etcd_admin import EtcdAdmin as EtcdAdmin
from tests.support.jobs_api import create_job, send, wait_for_job
from tests.support.role_process import ROLES as ROLES
from tests.support.role_process import RoleProcess as RoleProcess


def parse_time(text: str) -> datetime:
    """An RFC3339 time of the API (``...Z``) as an aware UTC datetime."""
    return datetime.fromisoformat(text).astimezone(UTC)


def utc_now() -> datetime:
    return datetime.now(UTC)


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
        #: Where this test's own reads go (the roles may be behind a broken link).
        self.check_mongo_uri = self.servers.check_mongo_uri or self.mongo_uri
        self.db_name = f"js_it_{suffix}"
        self.election_name = f"jobscheduler-it/{suffix}"
        self.topic_prefix = f"it-{suffix}."
        self.tenant = f"tenant-it-{suffix}"
        self.processes: list[RoleProcess] = []
        self._counter = 0
        self._mongo: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
            self.check_mongo_uri, tz_aware=True, tzinfo=UTC, serverSelectionTimeoutMS=5000
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

    def prepare(self, role: str, *, app: str | None = None, **env: str) -> RoleProcess:
        """A not-yet-started process of ``role`` (``run-<role> --app <app>`` with ``app``;
        ``env`` overrides the defaults)."""
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
        if app is not None:
            process.args = ["--app", app]
        self.processes.append(process)
        return process

    async def start(self, role: str, *, app: str | None = None, **env: str) -> RoleProcess:
        """Start one role process (of ``app``, if given) and wait until it is ready."""
        process = self.prepare(role, app=app, **env)
        process.spawn()
        await process.wait_ready(self.http)
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
        """A job created as a client should (503s retried with the same key)."""
        return await create_job(self.http, api, self.job_body(**fields))

    async def get_job(self, api: RoleProcess, job_id: str) -> dict[str, Any]:
        """GET /jobs/{id} (after checking that no role process died unasked)."""
        self.assert_alive()
        response = await send(self.http, "GET", f"{api.url}/jobs/{job_id}")
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
        """Poll GET /jobs/{id} until ``predicate(job)`` (checking before each poll that no
        role process died unasked); fail with the last state seen."""
        return await wait_for_job(
            self.http, api, job_id, predicate, timeout, interval, check=self.assert_alive
        )

    # -- the database directly ----------------------------------------------------------

    @property
    def jobs(self) -> pymongo.collection.Collection[dict[str, Any]]:
        return self._mongo[self.db_name]["jobs"]

    async def insert_due(
        self, count: int, key: str, vary: Callable[[int], Mapping[str, Any]] = lambda i: {}
    ) -> list[Job]:
        """Store ``count`` due ``noop`` jobs of this test's tenant straight into the
        database (keys ``<key>-<suffix>-<i>``, each with ``vary(i)``'s fields too)."""
        now = utc(utc_now())
        jobs = [
            Job(
                id=new_job_id(),
                idempotency_key=f"{key}-{self.suffix}-{i}",
                tenant_id=self.tenant,
                job_type="noop",
                **{"scheduled_at": now, **vary(i)},
                created_at=now,
                updated_at=now,
            )
            for i in range(count)
        ]
        await self.db(lambda c: c.insert_many([job_to_document(job) for job in jobs]))
        return jobs

    async def db(self, fn: Callable[[pymongo.collection.Collection[dict[str, Any]]], Any]) -> Any:
        """Run ``fn(jobs collection)`` in a worker thread."""
        return await trio.to_thread.run_sync(fn, self.jobs)

    # -- teardown -----------------------------------------------------------------------

    async def shutdown(self) -> list[str]:
        """SIGTERM every process still running (all at once) and wait for them; returns a
        problem line per process that did not exit 0 (see :func:`stop_all`)."""
        return await stop_all(self.processes)

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
