"""The checker's model of a run (reports, violations, the history) and its rules; see the
package's docstring."""

from __future__ import annotations

import enum
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

import attrs

from jobscheduler.domain.attempts import Attempt, Outcome
from jobscheduler.domain.cron import CatchUp, Occurrence, OccurrenceStatus, SkipReason
from jobscheduler.domain.model import Job, Status, cron_policy_of

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

    def violation(rule: Rule, detail: str) -> None:
        found.append(Violation(rule=rule, job_id=template.id, detail=detail))

    runs = [job for job in history.jobs.values() if job.template_id == template.id]
    per_fire = Counter(job.fire_at for job in runs if job.fire_at is not None)
    for fire_at, count in sorted(per_fire.items()):
        if count > 1:
            violation(
                Rule.DOUBLE_RUN,
                f"{count} runs for the fire time {fire_at.isoformat()}",
            )
    records = {record.fire_at: record for record in history.ledger.get(template.id, [])}
    for record in records.values():
        if record.status is OccurrenceStatus.SPAWNED and record.run_id not in history.jobs:
            violation(
                Rule.MISSING_RUN,
                f"the ledger says {record.fire_at.isoformat()} spawned "
                f"{record.run_id}, which does not exist",
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
            violation(
                Rule.MISSING_RUN,
                f"no run and no ledger record for the fire time {fire.at.isoformat()}",
            )
        elif (
            policy.catch_up is CatchUp.ALL
            and not ran
            and (record is None or record.status is OccurrenceStatus.SKIPPED)
            and (record is None or record.reason not in EXCUSED)
        ):
            reason = record.reason if record is not None else "nothing"
            violation(
                Rule.MISSING_RUN,
                f"catchUp=all, but the fire time {fire.at.isoformat()} has no run ({reason})",
            )
    return found
