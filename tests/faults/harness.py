"""One fault scenario: the distributed roles under a steady load, faults, and the checks.

A scenario starts the roles (API, schedulers, ``noop`` and ``slow`` executors, reaper) as
processes on the session's private servers, runs a :class:`LoadGenerator`, injects its
faults inside :meth:`Harness.fault` windows, stops the load and calls :meth:`Harness.settle`,
which waits for every stored job to end and then checks:

- the history checker (:mod:`.history`) finds no violation in the whole run;
- every job that got a 201 is ``completed`` (the built-in ``noop`` and ``slow`` handlers never
  fail, so a ``dlq`` job is a failure too: only a recovery could have put it there);
- no job completed twice: each ``job completed`` line of the executors' DEBUG logs is one
  accepted ``running -> completed`` write; a job with two such lines ran to completion twice,
  and a line for a job the store does not hold as completed is a lost completion. A
  completed job without a line is counted (``unlogged``), not failed: an executor whose
  completion write was cancelled in flight (store frozen) does not learn that the store
  applied it, logs nothing, and later drops the redelivery as stale;
- the API answered only 201 or 503, and no role process exited unasked; during the windows
  given to :meth:`Harness.require_api_answers`, it answered every create within the client's
  timeout, at least once with a 503;
- after each fault window, a job completed again within :data:`RECOVERY_BOUND`.

It prints one summary line per scenario (collected and shown again at the end of the run).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import trio
from bson import ObjectId

from jobscheduler.domain.model import Job, Status
from jobscheduler.store.mongo import MongoJobStore
from jobscheduler.store.mongo.store import document_to_job
from tests.support.cluster import Cluster, RoleProcess
from tests.support.servers import PrivateServers

from .history import check, describe, parse_reports, read_history
from .load import CLIENT_TIMEOUT, LoadGenerator, Sent

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
#: Once the load stopped, every stored job must end; the drain may take as long as the
#: machine's capacity needs (a loaded machine drains slower), but the number of unfinished
#: jobs must fall at least once every DRAIN_STALL seconds, and all be done within DRAIN_BOUND.
DRAIN_STALL = 30.0
DRAIN_BOUND = 600.0
#: Answers the API may give under faults.
ALLOWED_STATUSES = frozenset({201, 503})

_COMPLETED = re.compile(r"^(\S+) debug\s+job completed\b.*?\bjob_id=([0-9a-f]{24})", re.MULTILINE)


def _log_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def completions(process: RoleProcess) -> list[tuple[datetime, str]]:
    """(time, job id) of every completion an executor wrote."""
    return [(_log_time(ts), job_id) for ts, job_id in _COMPLETED.findall(process.log())]


@attrs.define(kw_only=True)
class Window:
    """When a fault was in force."""

    name: str
    start: datetime
    end: datetime | None = None
    #: Seconds within which a job must complete after the window.
    recovery_bound: float = 30.0


@attrs.define(kw_only=True)
class Summary:
    scenario: str
    created: int
    accepted: int
    completed: int
    dlq: int
    lost: int
    timeouts: int
    api_503: int
    stored_without_201: int
    max_completions: int
    unlogged: int
    reruns: int
    recovery: list[float | None]
    drain: float
    #: The history checker's violations (tests/faults/history/).
    violations: int
    figures: dict[str, float]

    def line(self) -> str:
        recovery = ",".join("never" if r is None else f"{r:.1f}s" for r in self.recovery)
        return (
            f"{self.scenario}: created={self.created} accepted={self.accepted} "
            f"completed={self.completed} dlq={self.dlq} lost={self.lost} "
            f"max_completions_per_job={self.max_completions} unlogged={self.unlogged} "
            f"first_completion_after_fault={recovery} api_503={self.api_503} "
            f"timeouts={self.timeouts} stored_without_201={self.stored_without_201} "
            f"reruns={self.reruns} drain={self.drain:.1f}s violations={self.violations}"
            + "".join(f" {name.replace(' ', '_')}={v:.1f}s" for name, v in self.figures.items())
        )


class Harness:
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

    async def start(self, *, schedulers: int = 1, noop: int = 2, slow: int = 1) -> None:
        """Start the roles; all must be ready."""
        specs: list[tuple[str, dict[str, str]]] = [("api", {}), ("reaper", DEBUG_ENV)]
        specs += [("scheduler", DEBUG_ENV)] * schedulers
        specs += [("executor", {"JOB_TYPE": "noop", **DEBUG_ENV})] * noop
        specs += [("executor", {"JOB_TYPE": "slow", **DEBUG_ENV})] * slow
        processes = await self.cluster.start_all(*specs)
        self.api = processes[0]
        self.schedulers = [p for p in processes if p.role == "scheduler"]
        self.noop = [p for p in processes if p.env.get("JOB_TYPE") == "noop"]
        self.slow = [p for p in processes if p.env.get("JOB_TYPE") == "slow"]
        self.load.api_url = self.api.url

    async def add_scheduler(self) -> RoleProcess:
        """One more scheduler (e.g. in place of a killed one), started and ready."""
        (scheduler,) = await self.cluster.start_all(("scheduler", DEBUG_ENV))
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

    async def executors_complete_again(
        self, since: datetime, executors: list[RoleProcess], timeout: float = RECOVERY_BOUND
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

    # -- the checks ------------------------------------------------------------------------

    async def settle(self) -> Summary:
        """Wait for every stored job to end, print the summary line, run the checks."""
        self.thaw_all()
        stopped = trio.current_time()
        stalled = False
        with trio.move_on_after(DRAIN_BOUND) as drain_scope:
            least, progressed = None, stopped
            while unfinished := await self.count(status={"$nin": ["completed", "dlq"]}, cron=None):
                self.cluster.assert_alive()
                if least is None or unfinished < least:
                    least, progressed = unfinished, trio.current_time()
                elif trio.current_time() - progressed > DRAIN_STALL:
                    stalled = True
                    break
                await trio.sleep(0.5)
        drain = trio.current_time() - stopped
        self.cluster.assert_alive()
        # Cron templates never finish; their runs are jobs no client sent.
        stored = {job.id: job for job in await self.jobs(cron=None)}
        sent_by_clients = {i for i, job in stored.items() if job.template_id is None}
        sent = self.load.sent
        self._write_sent_log(sent)
        accepted = {s.job_id for s in sent if s.job_id is not None}
        done = {i for i, job in stored.items() if job.status is Status.COMPLETED}
        dlq = {i for i, job in stored.items() if job.status is Status.DLQ}
        per_job = Counter(job_id for p in self.all_executors for _, job_id in completions(p))
        recovery = [self._recovery(window, stored.values()) for window in self.windows]
        problems = [p for window in self.api_windows for p in self._api_problems(window)]
        violations = await self.check_history()
        summary = Summary(
            scenario=self.scenario,
            created=len(sent),
            accepted=len(accepted),
            completed=len(done),
            dlq=len(dlq),
            lost=len(accepted - done),
            timeouts=sum(1 for s in sent if s.error == "timeout"),
            api_503=sum(1 for s in sent if s.status == 503),
            stored_without_201=len(sent_by_clients - accepted),
            max_completions=max(per_job.values(), default=0),
            unlogged=len(done - set(per_job)),
            # ``attempts`` counts attempts started: a job that ran more than once reads 2 or more.
            reruns=sum(1 for i in done if stored[i].attempts > 1),
            recovery=recovery,
            drain=drain,
            violations=len(violations),
            figures=self.figures,
        )
        line = summary.line()
        print(line)
        self.report.append(line)

        statuses = Counter(
            s.status for s in sent if s.answered and s.status not in ALLOWED_STATUSES
        )
        if statuses:
            problems.append(f"unexpected API answers: {dict(statuses)}")
        unanswered = Counter(s.error for s in sent if not s.answered)
        if unanswered:
            problems.append(
                f"{sum(unanswered.values())} creates got no answer within {CLIENT_TIMEOUT}s "
                f"(the API must answer 503 instead of hanging): {dict(unanswered)}"
            )
        missing = accepted - stored.keys()
        if missing:
            problems.append(
                f"{len(missing)} accepted jobs are not in the store: {sorted(missing)[:5]}"
            )
        unfinished = {i: j.status.value for i, j in stored.items() if i not in done}
        if unfinished:
            problems.append(
                f"{len(unfinished)} stored jobs did not complete "
                f"(statuses {dict(Counter(unfinished.values()))}), e.g. "
                f"{list(unfinished.items())[:5]}"
            )
        if stalled:
            problems.append(f"the drain made no progress for {DRAIN_STALL}s")
        if drain_scope.cancelled_caught:
            problems.append(f"jobs were still unfinished {DRAIN_BOUND}s after the load stopped")
        twice = {i: n for i, n in per_job.items() if n > 1}
        if twice:
            problems.append(
                f"{len(twice)} jobs completed more than once: {list(twice.items())[:5]}"
            )
        phantom = set(per_job) - done
        if phantom:
            problems.append(
                f"{len(phantom)} jobs have a completion line but are not completed in the "
                f"store: {sorted(phantom)[:5]}; as stored: "
                + "; ".join(repr(stored[i]) for i in sorted(phantom)[:3] if i in stored)
            )
        problems.extend(violations)
        for window, seconds in zip(self.windows, recovery, strict=True):
            if seconds is None or seconds > window.recovery_bound:
                problems.append(
                    f"after {window.name!r} no job completed within {window.recovery_bound}s "
                    f"(first: {seconds})"
                )
        assert not problems, f"{self.scenario}:\n- " + "\n- ".join(problems)
        return summary

    async def check_history(self) -> list[str]:
        """The history checker's violations over the whole run (every job of this test's
        database, its attempt records and ledger, and every executor's outcome lines), each
        printed with the job's history."""
        store = MongoJobStore(self.cluster.check_mongo_uri, self.cluster.db_name)
        await store.start()
        try:
            reports = [
                report
                for process in self.all_executors
                for report in parse_reports(process.log(), process.name)
            ]
            history = await read_history(store, reports)
        finally:
            await store.close()
        violations = check(history)
        for violation in violations:
            print(describe(history, violation))
        return [f"history: {v.rule}: job {v.job_id}: {v.detail}" for v in violations]

    @staticmethod
    def _recovery(window: Window, jobs: Any) -> float | None:
        """Seconds from the window's end to the first completion after it."""
        assert window.end is not None
        after = [
            job.updated_at
            for job in jobs
            if job.status is Status.COMPLETED and job.updated_at >= window.end
        ]
        return (min(after) - window.end).total_seconds() if after else None

    def require_api_answers(self, window: Window, *, with_503: bool = True) -> None:
        """Have :meth:`settle` check that every create sent during ``window`` got an answer
        within the client's timeout (a 503 while the store is out, not a hang), and, when
        ``with_503``, that at least one was a 503."""
        self.api_windows.append(window)
        if not with_503:
            self._no_503_needed.add(window.name)

    def _write_sent_log(self, sent: list[Sent]) -> None:
        """Every create the load sent, one JSON line each, next to the role logs (for
        finding out which requests went unanswered and when)."""
        with (self.cluster.tmp_path / "creates.jsonl").open("w") as out:
            for s in sent:
                out.write(json.dumps(attrs.asdict(s), default=str) + "\n")

    def _api_problems(self, window: Window) -> list[str]:
        assert window.end is not None
        during = self.load.answered_between(window.start, window.end + timedelta(seconds=0.5))
        slow = [s for s in during if s.latency is None or s.latency > CLIENT_TIMEOUT]
        unavailable = [s for s in during if s.status == 503]
        answered = [s.latency for s in during if s.latency is not None]
        self.figures["slowest answer during fault"] = max(answered, default=0.0)
        problems: list[str] = []
        if slow:
            problems.append(
                f"during {window.name!r}, {len(slow)} of {len(during)} creates got no answer "
                f"within {CLIENT_TIMEOUT}s ({dict(Counter(s.error or s.status for s in slow))})"
            )
        if not unavailable and window.name not in self._no_503_needed:
            problems.append(f"during {window.name!r}, no create got a 503")
        return problems
