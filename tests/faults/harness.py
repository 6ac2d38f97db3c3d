"""One fault scenario: the distributed roles under a steady load, faults, and the checks.

A scenario starts the roles (API, schedulers, ``noop`` and ``slow`` executors, reaper) as
processes on the session's private servers, runs a :class:`LoadGenerator`, injects its
faults inside :meth:`Harness.fault` windows, stops the load and calls :meth:`Harness.settle`,
which waits for every stored job to end and then runs the checks of :mod:`.checks`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import trio
from bson import ObjectId

from jobscheduler.domain.model import Job, Status
from jobscheduler.store.mongo.store import document_to_job
from tests.support.cluster import Cluster, RoleProcess
from tests.support.servers import PrivateServers

from .checks import ScenarioChecks, Window, completions
from .load import LoadGenerator

#: Settings of every role: quick ticks, timeouts and sweeps, so recovery takes seconds.
ROLE_ENV = {
    "SCHEDULER_TICK": "200ms",
    "QUEUED_TIMEOUT": "5s",
    "CLAIM_TIMEOUT": "6s",
    "HEARTBEAT_INTERVAL": "1s",
    "REAPER_INTERVAL": "1s",
    "SHUTDOWN_GRACE": "3s",
    "ELECTION_TTL": "3",
    "KAFKA_REJOIN_TIMEOUT": "10s",
    "KAFKA_UNHEALTHY_AFTER": "30s",
    "LOG_LEVEL": "INFO",
}
#: Every role but the API logs at DEBUG: the executors' ``job completed`` lines are the
#: double-completion check, the schedulers' show each wake-up dispatched (a stalled dispatch
#: shows), the reaper's each job it re-pends or recovers, with its commands to the store.
DEBUG_ENV = {"LOG_LEVEL": "DEBUG"}
#: Seconds within which a job must complete after a fault ends.
RECOVERY_BOUND = 30.0
#: Seconds within which *each* executor must complete a job after a fault ends. Longer: on
#: a machine short of CPU, a Kafka freeze can leave etcd and the store slow enough after it
#: that the leader resigns once or twice and dispatches a few hundred jobs in half a minute,
#: oldest first, so one job type's executor may get nothing for 40 s while consuming fine.
REJOIN_BOUND = 60.0


class Harness(ScenarioChecks):
    """The role processes, load and fault windows of one scenario."""

    def __init__(
        self,
        cluster: Cluster,
        servers: PrivateServers,
        scenario: str,
        report: list[str],
        *,
        rate: float = 20.0,
    ) -> None:
        self.cluster = cluster
        self.servers = servers
        self.scenario = scenario
        self.report = report
        self.windows: list[Window] = []
        self.load = LoadGenerator(
            "", cluster.tenant, f"f-{cluster.suffix}", api_key=cluster.api_key, rate=rate
        )
        self.api: RoleProcess | None = None
        self.schedulers: list[RoleProcess] = []
        self.noop: list[RoleProcess] = []
        self.slow: list[RoleProcess] = []
        self.frozen: set[RoleProcess] = set()
        #: Scenario-specific measurements (seconds) for the summary line.
        self.figures: dict[str, float] = {}
        #: Fault windows during which the API must answer every create in time.
        self.api_windows: list[Window] = []
        self._no_503_needed: set[str] = set()

    # -- roles -----------------------------------------------------------------------------

    async def start(
        self, *, schedulers: int = 1, noop: int = 2, slow: int = 1, **scheduler_env: str
    ) -> None:
        """Start the roles (the schedulers with ``scheduler_env`` too); all must be ready."""
        specs: list[tuple[str, dict[str, str]]] = [("api", {}), ("reaper", DEBUG_ENV)]
        specs += [("scheduler", {**DEBUG_ENV, **scheduler_env})] * schedulers
        specs += [("executor", {"JOB_TYPE": "noop", **DEBUG_ENV})] * noop
        specs += [("executor", {"JOB_TYPE": "slow", **DEBUG_ENV})] * slow
        processes = await self.cluster.start_all(*specs)
        self.api = processes[0]
        self.schedulers = [p for p in processes if p.role == "scheduler"]
        self.noop = [p for p in processes if p.env.get("JOB_TYPE") == "noop"]
        self.slow = [p for p in processes if p.env.get("JOB_TYPE") == "slow"]
        self.load.api_url = self.api.url

    async def add_scheduler(self, **env: str) -> RoleProcess:
        """One more scheduler (e.g. in place of a killed one, with ``env`` too), started and
        ready."""
        (scheduler,) = await self.cluster.start_all(("scheduler", {**DEBUG_ENV, **env}))
        self.schedulers.append(scheduler)
        return scheduler

    @property
    def executors(self) -> list[RoleProcess]:
        """The executors still running (not killed by the scenario)."""
        return [p for p in (*self.noop, *self.slow) if not p.killed]

    @property
    def all_executors(self) -> list[RoleProcess]:
        """Every executor started, killed ones included (their logs count too)."""
        return [p for p in self.cluster.processes if p.role == "executor"]

    def freeze(self, *processes: RoleProcess) -> None:
        for process in processes:
            process.freeze()
            self.frozen.add(process)

    def thaw(self, *processes: RoleProcess) -> None:
        for process in processes:
            process.thaw()
            self.frozen.discard(process)

    def thaw_all(self) -> None:
        self.thaw(*[p for p in self.frozen if p.running()])

    # -- load and faults -------------------------------------------------------------------

    @asynccontextmanager
    async def loaded(self) -> AsyncIterator[LoadGenerator]:
        """The load runs inside; on exit it stops and every answer is in."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.load.run)
            try:
                yield self.load
            finally:
                self.load.stop()

    @asynccontextmanager
    async def fault(
        self, name: str, *, recovery_bound: float = RECOVERY_BOUND
    ) -> AsyncIterator[Window]:
        window = Window(name=name, start=datetime.now(UTC), recovery_bound=recovery_bound)
        self.windows.append(window)
        try:
            yield window
        finally:
            window.end = datetime.now(UTC)

    async def jobs(self, **query: Any) -> list[Job]:
        docs = await self.cluster.db(
            lambda jobs: list(jobs.find({"tenantId": self.cluster.tenant, **query}))
        )
        return [document_to_job(doc) for doc in docs]

    async def count(self, **query: Any) -> int:
        result: int = await self.cluster.db(
            lambda jobs: jobs.count_documents({"tenantId": self.cluster.tenant, **query})
        )
        return result

    async def warm_up(self, completed: int = 20, timeout: float = 30.0) -> None:
        """Wait until the load's jobs complete (the roles are serving)."""
        with trio.fail_after(timeout):
            while await self.count(status=Status.COMPLETED.value) < completed:
                self.cluster.assert_alive()
                await trio.sleep(0.2)

    async def build_backlog(self, size: int = 150, timeout: float = 10.0) -> None:
        """Leave ``size`` wake-ups waiting in Kafka for the ``noop`` executors: stop them
        (SIGSTOP, shorter than their consumer session), create the jobs and wait until the
        scheduler has queued (published) them all. The caller resumes the executors with
        :meth:`thaw` once its store fault is in force, so their picks fail."""
        self.freeze(*self.noop)
        sent = await self.load.burst(size)
        ids = [s.job_id for s in sent if s.job_id is not None]
        answers = Counter(s.error or s.status for s in sent if not s.job_id)
        assert len(ids) == size, f"the backlog's creates were not all accepted: {answers}"

        query = {"_id": {"$in": [ObjectId(i) for i in ids]}, "status": Status.PENDING.value}
        with trio.fail_after(timeout):
            while await self.count(**query) > 0:
                await trio.sleep(0.1)

    async def consuming_again(
        self, window: Window, executors: list[RoleProcess] | None = None
    ) -> dict[str, float]:
        """After ``window`` closed: :meth:`executors_complete_again` for ``executors`` (all
        of them by default), then 3 s more for the writes in flight to land; the waits."""
        assert window.end is not None
        waits = await self.executors_complete_again(
            window.end, self.executors if executors is None else executors
        )
        await trio.sleep(3)
        return waits

    async def running_on(self, executor: RoleProcess, at_least: int = 2) -> None:
        """Wait (20 s at most) until ``executor`` runs ``at_least`` handlers."""
        with trio.fail_after(20):
            while await self.count(status="running", claimedBy=executor.worker_id) < at_least:
                await trio.sleep(0.1)

    async def executors_complete_again(
        self, since: datetime, executors: list[RoleProcess], timeout: float = REJOIN_BOUND
    ) -> dict[str, float]:
        """Wait until each executor wrote a completion after ``since`` (it consumes again:
        a member that left its group and never rejoined would not); returns the seconds."""
        waits: dict[str, float] = {}
        try:
            with trio.fail_after(timeout):
                while len(waits) < len(executors):
                    for process in executors:
                        after = [t for t, _ in completions(process) if t >= since]
                        if after and process.name not in waits:
                            waits[process.name] = (min(after) - since).total_seconds()
                    self.cluster.assert_alive()
                    await trio.sleep(0.2)
        except trio.TooSlowError:
            missing = [p.name for p in executors if p.name not in waits]
            raise AssertionError(
                f"{self.scenario}: executors {missing} completed nothing within {timeout}s "
                f"after {since.isoformat()} (the others did: {waits})"
            ) from None
        return waits
