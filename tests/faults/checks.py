"""The checks that end a fault scenario: :meth:`ScenarioChecks.settle` (mixed into
:class:`~tests.faults.harness.Harness`) waits for every stored job to end, then checks:

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
  given to :meth:`ScenarioChecks.require_api_answers`, it answered every create within the client's
  timeout, at least once with a 503;
- after each fault window, a job completed again within the window's bound (by default
  :data:`~tests.faults.harness.RECOVERY_BOUND`).

It prints one summary line per scenario (collected and shown again at the end of the run).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import trio

from jobscheduler.domain.model import Status
from jobscheduler.store.mongo import MongoJobStore
from tests.support.cluster import RoleProcess

from .history import check_store, parse_reports
from .load import CLIENT_TIMEOUT, Sent

#: Once the load stopped, every stored job must end; the drain may take as long as the
#: machine's capacity needs (a loaded machine drains slower), but the number of unfinished
#: jobs must fall at least once every DRAIN_STALL seconds, and all be done within DRAIN_BOUND.
DRAIN_STALL = 30.0
DRAIN_BOUND = 600.0
#: How long no job may be left unfinished before the drain counts as done: a create that
#: hung on a frozen store may still land after its thaw (its client got a 503 or a timeout,
#: the API's detached call goes on), and its job must then run like any other.
DRAIN_QUIET = 3.0
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


class ScenarioChecks:
    """The checks of :class:`~tests.faults.harness.Harness` (its base): they read its
    cluster, load, fault windows and executors, and report to its ``report``."""

    async def settle(self) -> Summary:
        """Wait for every stored job to end, print the summary line, run the checks."""
        self.thaw_all()
        stopped = trio.current_time()
        stalled = False
        quiet_since: float | None = None
        with trio.move_on_after(DRAIN_BOUND) as drain_scope:
            least, progressed = None, stopped
            while True:
                unfinished = await self.count(status={"$nin": ["completed", "dlq"]}, cron=None)
                now = trio.current_time()
                if not unfinished:
                    quiet_since = now if quiet_since is None else quiet_since
                    if now - quiet_since >= DRAIN_QUIET:
                        break
                else:
                    quiet_since = None
                    self.cluster.assert_alive()
                    if least is None or unfinished < least:
                        least, progressed = unfinished, now
                    elif now - progressed > DRAIN_STALL:
                        stalled = True
                        break
                await trio.sleep(0.5)
        # (Up to when the jobs were all done, not the quiet wait after it.)
        drain = (trio.current_time() if quiet_since is None else quiet_since) - stopped
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
        reports = [
            report
            for process in self.all_executors
            for report in parse_reports(process.log(), process.name)
        ]
        _, violations = await check_store(store, reports)
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
