"""A history checker for the job state machine, in the spirit of Jepsen's Elle: after a run,
read every job's record, its attempt records, every template's cron ledger and what the
executors reported, and name every way the whole history breaks a promise.

The rules (each a :class:`Rule`):

- ``lost-outcome``: an executor saw an outcome applied (its ``job completed``,
  ``job failed; will retry`` or ``job dead-lettered`` line) that the store does not hold:
  no attempt record of that outcome, or the job no longer in the status it wrote while no
  user action started a new run.
- ``double-completion``: two ``completed`` attempts in one run of a job, or more
  completion lines for a job than it has completed runs.
- ``left-final-status``: an attempt of a run after that run completed or was dead-lettered
  (only a user's retry, which starts a new run, may move a job out of a final status).
- ``early-start``: an attempt started before the job was due.
- ``double-run``: two runs of one template for one fire time.
- ``missing-run``: a fire time the template's catch-up policy gives a run, without one; or
  a spawned ledger record whose run does not exist.
- ``phantom-attempt``: an attempt record of an attempt that never started (no start time,
  or a number the job never reached).

Run it on any store after any run::

    python -m tests.faults.history --mongo-uri mongodb://127.0.0.1:27017 --database js \\
        --log executor-1.log --log executor-2.log
    python -m tests.faults.history --sqlite data/jobscheduler.db --log dev.log

It prints each violation with the job's whole history and exits 1 if there is any.
"""

from __future__ import annotations

import argparse
import enum
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import attrs
import trio

from jobscheduler.domain.attempts import Attempt, Outcome, attempt_to_json
from jobscheduler.domain.cron import CatchUp, Occurrence, OccurrenceStatus, SkipReason
from jobscheduler.domain.model import Job, Status, cron_policy_of, job_to_json
from jobscheduler.store import JobStore
from jobscheduler.store.query import Cursor, JobQuery

#: Clock tolerance when comparing a start with a due time: stores keep milliseconds.
TIME_TOLERANCE = timedelta(milliseconds=2)
#: A fire time this recent when the history was read may not have been fired yet.
FIRE_GRACE = timedelta(seconds=30)
#: Skip reasons that excuse a fire time from running under ``catchUp="all"``.
EXCUSED = frozenset(
    {SkipReason.PAUSED, SkipReason.OVERLAP, SkipReason.DST_GAP, SkipReason.OUTSIDE_CATCH_UP_WINDOW}
)
#: Outcomes that end an attempt that started.
STARTED_OUTCOMES = frozenset(
    {Outcome.COMPLETED, Outcome.FAILED, Outcome.TIMED_OUT, Outcome.CANCELLED}
)


class Rule(enum.StrEnum):
    LOST_OUTCOME = "lost-outcome"
    DOUBLE_COMPLETION = "double-completion"
    LEFT_FINAL_STATUS = "left-final-status"
    EARLY_START = "early-start"
    DOUBLE_RUN = "double-run"
    MISSING_RUN = "missing-run"
    PHANTOM_ATTEMPT = "phantom-attempt"


class Reported(enum.StrEnum):
    """An outcome an executor saw applied, as its log says."""

    COMPLETED = "completed"
    RETRIED = "retried"
    DEAD_LETTERED = "dlq"


@attrs.frozen(kw_only=True)
class Report:
    """One executor log line saying an outcome was written."""

    at: datetime
    job_id: str
    outcome: Reported
    source: str = ""


@attrs.frozen(kw_only=True)
class Violation:
    rule: Rule
    #: The job (or, for the cron rules, the template) the violation is about.
    job_id: str
    detail: str


@attrs.define(kw_only=True)
class History:
    """What one run left behind."""

    #: When the history was read (fire times after ``read_at - FIRE_GRACE`` are not due yet).
    read_at: datetime
    jobs: dict[str, Job] = attrs.Factory(dict)
    attempts: dict[str, list[Attempt]] = attrs.Factory(dict)
    #: Template id -> its ledger records.
    ledger: dict[str, list[Occurrence]] = attrs.Factory(dict)
    reports: list[Report] = attrs.Factory(list)

    def attempts_of(self, job_id: str) -> list[Attempt]:
        return self.attempts.get(job_id, [])


# --------------------------------------------------------------------------- the rules


def check(history: History) -> list[Violation]:
    """Every violation of the history, job by job, then template by template."""
    found: list[Violation] = []
    reports: dict[str, list[Report]] = defaultdict(list)
    for report in history.reports:
        reports[report.job_id].append(report)
    for job_id in sorted(set(history.jobs) | set(reports)):
        found += _check_job(history, job_id, reports.get(job_id, []))
    for template in sorted(
        (job for job in history.jobs.values() if job.cron is not None), key=lambda t: t.id
    ):
        found += _check_template(history, template)
    return found


def _check_job(history: History, job_id: str, reports: Sequence[Report]) -> list[Violation]:
    job = history.jobs.get(job_id)
    attempts = history.attempts_of(job_id)
    found: list[Violation] = []

    def violation(rule: Rule, detail: str) -> None:
        found.append(Violation(rule=rule, job_id=job_id, detail=detail))

    if job is None:
        for report in reports:
            violation(Rule.LOST_OUTCOME, f"an executor reported {report.outcome} for no job")
        return found
    by_run: dict[int, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        by_run[attempt.run].append(attempt)
    current_run = job.run or 0

    # lost-outcome: what an executor saw applied, the store must hold.
    held = Counter(a.outcome for a in attempts)
    wanted = {
        Reported.COMPLETED: (Outcome.COMPLETED, Status.COMPLETED),
        Reported.DEAD_LETTERED: (None, Status.DLQ),
        Reported.RETRIED: (None, None),
    }
    for report in reports:
        outcome, status = wanted[report.outcome]
        if outcome is not None and held[outcome] == 0:
            violation(
                Rule.LOST_OUTCOME,
                f"an executor saw {report.outcome} applied at {report.at.isoformat()}, "
                f"but the job has no {outcome} attempt record",
            )
        if (
            status is not None
            and job.status is not status
            and current_run == _run_of(attempts, report)
        ):
            violation(
                Rule.LOST_OUTCOME,
                f"an executor saw {report.outcome} applied at {report.at.isoformat()}, "
                f"but the job is {job.status} in the same run",
            )
        if report.outcome is Reported.RETRIED and not any(
            a.outcome in (Outcome.FAILED, Outcome.TIMED_OUT) for a in attempts
        ):
            violation(
                Rule.LOST_OUTCOME,
                f"an executor saw a failed attempt applied at {report.at.isoformat()}, "
                "but the job has no failed attempt record",
            )

    # double-completion
    completed_runs = 0
    for run, records in sorted(by_run.items()):
        completions = [a for a in records if a.outcome is Outcome.COMPLETED]
        if len(completions) > 1:
            violation(
                Rule.DOUBLE_COMPLETION, f"run {run} has {len(completions)} completed attempts"
            )
        completed_runs += bool(completions)
    lines = sum(1 for r in reports if r.outcome is Reported.COMPLETED)
    if lines > 1 and lines > completed_runs:
        violation(
            Rule.DOUBLE_COMPLETION,
            f"{lines} completion lines for {completed_runs} completed run(s)",
        )

    # left-final-status: nothing of a run may follow its completion or dead letter.
    for run, records in sorted(by_run.items()):
        final = [a for a in records if a.outcome is Outcome.COMPLETED]
        for end in final:
            later = [
                a
                for a in records
                if a is not end
                and (a.number > end.number or (a.started_at or a.finished_at) > end.finished_at)
                and a.outcome is not Outcome.COMPLETED
            ]
            for attempt in later:
                violation(
                    Rule.LEFT_FINAL_STATUS,
                    f"run {run} attempt {attempt.number} ({attempt.outcome}) follows its "
                    f"completion by attempt {end.number}",
                )
    if job.status is not Status.COMPLETED and any(
        a.outcome is Outcome.COMPLETED for a in by_run.get(current_run, [])
    ):
        violation(
            Rule.LEFT_FINAL_STATUS,
            f"run {current_run} completed, yet the job is {job.status}",
        )

    # early-start: the attempt that ended the job's last wait started after its due time.
    last_run = sorted(by_run.get(current_run, []), key=_start)
    if last_run and job.status in (Status.COMPLETED, Status.DLQ):
        last = last_run[-1]
        if last.started_at is not None and last.started_at + TIME_TOLERANCE < job.scheduled_at:
            violation(
                Rule.EARLY_START,
                f"attempt {last.number} started at {last.started_at.isoformat()}, before "
                f"the job was due at {job.scheduled_at.isoformat()}",
            )
    first = [a for a in by_run.get(0, []) if a.started_at is not None]
    due_first = job.fire_at if job.fire_at is not None else None
    if first and due_first is not None:
        earliest = min(first, key=_start)
        assert earliest.started_at is not None
        if earliest.started_at + TIME_TOLERANCE < due_first:
            violation(
                Rule.EARLY_START,
                f"the run started at {earliest.started_at.isoformat()}, before its fire "
                f"time {due_first.isoformat()}",
            )

    # phantom-attempt
    for attempt in attempts:
        if attempt.outcome in STARTED_OUTCOMES and attempt.started_at is None:
            violation(
                Rule.PHANTOM_ATTEMPT,
                f"run {attempt.run} attempt {attempt.number} ({attempt.outcome}) never started",
            )
        if attempt.number < 1 or attempt.number > job.max_attempts:
            violation(
                Rule.PHANTOM_ATTEMPT,
                f"run {attempt.run} has attempt number {attempt.number} "
                f"(maxAttempts {job.max_attempts})",
            )
    return found


def _start(attempt: Attempt) -> datetime:
    return attempt.started_at or attempt.finished_at


def _run_of(attempts: Sequence[Attempt], report: Report) -> int:
    """The run an outcome report belongs to: that of the record finished nearest it."""
    if not attempts:
        return 0
    nearest = min(attempts, key=lambda a: abs(a.finished_at - report.at))
    return nearest.run


def _check_template(history: History, template: Job) -> list[Violation]:
    found: list[Violation] = []
    runs = [job for job in history.jobs.values() if job.template_id == template.id]
    per_fire = Counter(job.fire_at for job in runs if job.fire_at is not None)
    for fire_at, count in sorted(per_fire.items()):
        if count > 1:
            found.append(
                Violation(
                    rule=Rule.DOUBLE_RUN,
                    job_id=template.id,
                    detail=f"{count} runs for the fire time {fire_at.isoformat()}",
                )
            )
    records = {record.fire_at: record for record in history.ledger.get(template.id, [])}
    for record in records.values():
        if record.status is OccurrenceStatus.SPAWNED and record.run_id not in history.jobs:
            found.append(
                Violation(
                    rule=Rule.MISSING_RUN,
                    job_id=template.id,
                    detail=f"the ledger says {record.fire_at.isoformat()} spawned "
                    f"{record.run_id}, which does not exist",
                )
            )
    assert template.cron is not None
    policy = cron_policy_of(template)
    end = min(history.read_at - FIRE_GRACE, template.updated_at)
    if template.status is Status.PENDING:
        end = history.read_at - FIRE_GRACE
    for fire in policy.fires(template.cron, template.created_at):
        if fire.at > end:
            break
        record = records.get(fire.at)
        ran = per_fire.get(fire.at, 0) > 0
        if record is None and not ran:
            found.append(
                Violation(
                    rule=Rule.MISSING_RUN,
                    job_id=template.id,
                    detail=f"no run and no ledger record for the fire time {fire.at.isoformat()}",
                )
            )
        elif (
            policy.catch_up is CatchUp.ALL
            and not ran
            and (record is None or record.status is OccurrenceStatus.SKIPPED)
            and (record is None or record.reason not in EXCUSED)
        ):
            reason = record.reason if record is not None else "nothing"
            found.append(
                Violation(
                    rule=Rule.MISSING_RUN,
                    job_id=template.id,
                    detail=f"catchUp=all, but the fire time {fire.at.isoformat()} has no run "
                    f"({reason})",
                )
            )
    return found


# --------------------------------------------------------------------------- reading a run

_TEXT_LINE = re.compile(r"^(?P<ts>\S+Z) (?P<level>\w+)\s+(?P<msg>.*?)(?: (?P<fields>\w+=.*))?$")
_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)')
_MESSAGES = {
    "job completed": Reported.COMPLETED,
    "job failed; will retry": Reported.RETRIED,
    "job dead-lettered": Reported.DEAD_LETTERED,
}


def parse_reports(text: str, source: str = "") -> list[Report]:
    """The outcome reports in an executor's log, text (logfmt) or JSON lines."""
    out: list[Report] = []
    for line in text.splitlines():
        fields: Mapping[str, object]
        if line.startswith("{"):
            try:
                fields = json.loads(line)
            except ValueError:
                continue
        else:
            match = _TEXT_LINE.match(line)
            if match is None:
                continue
            fields = {"ts": match["ts"], "msg": match["msg"]}
            for key, value in _FIELD.findall(match["fields"] or ""):
                fields = {**fields, key: json.loads(value) if value.startswith('"') else value}
        outcome = _MESSAGES.get(str(fields.get("msg", "")))
        job_id = fields.get("job_id")
        if outcome is None or not isinstance(job_id, str):
            continue
        at = datetime.strptime(str(fields["ts"]), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        out.append(Report(at=at, job_id=job_id, outcome=outcome, source=source))
    return out


async def read_history(
    store: JobStore, reports: Iterable[Report] = (), *, read_at: datetime | None = None
) -> History:
    """Everything ``store`` holds of every tenant's jobs, with the executors' reports."""
    history = History(read_at=read_at or datetime.now(UTC), reports=list(reports))
    after: Cursor | None = None
    while True:
        page = await store.find_jobs(JobQuery(tenant_id=None), 1000, after)
        for job in page:
            history.jobs[job.id] = job
        if len(page) < 1000:
            break
        after = Cursor.after(page[-1])
    for job in history.jobs.values():
        history.attempts[job.id] = await store.attempts(job.id)
        if job.cron is not None:
            history.ledger[job.id] = await store.occurrences(job.id, limit=100_000)
    return history


def describe(history: History, violation: Violation) -> str:
    """The violation, then the whole history of its job (or template)."""
    lines = [f"VIOLATION {violation.rule}: job {violation.job_id}: {violation.detail}"]
    job = history.jobs.get(violation.job_id)
    if job is not None:
        lines.append(f"  job: {json.dumps(job_to_json(job), default=str)}")
    for attempt in sorted(history.attempts_of(violation.job_id), key=lambda a: (a.run, a.number)):
        lines.append(f"  attempt: {json.dumps(attempt_to_json(attempt))}")
    for report in sorted(
        (r for r in history.reports if r.job_id == violation.job_id), key=lambda r: r.at
    ):
        lines.append(f"  reported {report.outcome} at {report.at.isoformat()} ({report.source})")
    for record in sorted(history.ledger.get(violation.job_id, []), key=lambda r: r.fire_at):
        lines.append(
            f"  ledger: {record.fire_at.isoformat()} {record.status}"
            f" run={record.run_id} reason={record.reason}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- command line


async def _main(args: argparse.Namespace) -> int:
    store: JobStore
    if args.sqlite:
        from jobscheduler.store.sqlite import SQLiteJobStore

        store = SQLiteJobStore(args.sqlite)
    else:
        from jobscheduler.store.mongo import MongoJobStore

        store = MongoJobStore(args.mongo_uri, args.database)
    reports = [
        report
        for path in args.log
        for report in parse_reports(await trio.Path(path).read_text(), path)
    ]
    await store.start()
    try:
        history = await read_history(store, reports)
    finally:
        await store.close()
    violations = check(history)
    for violation in violations:
        print(describe(history, violation))
    print(
        f"{len(history.jobs)} jobs, {sum(map(len, history.attempts.values()))} attempt records, "
        f"{len(history.reports)} reports: {len(violations)} violation(s)"
    )
    return 1 if violations else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--sqlite", help="an embedded store's file")
    where.add_argument("--mongo-uri", help="a MongoDB-protocol server")
    parser.add_argument("--database", default="jobscheduler", help="with --mongo-uri")
    parser.add_argument("--log", action="append", default=[], help="an executor's log file")
    return trio.run(_main, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
