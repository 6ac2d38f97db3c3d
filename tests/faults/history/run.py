"""Reading a run into a :class:`~.rules.History`: the executors' log lines and the store."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from jobscheduler.domain.attempts import attempt_to_json
from jobscheduler.domain.model import job_to_json
from jobscheduler.store import JobStore
from jobscheduler.store.jobs import OccurrenceQuery
from jobscheduler.store.query import Cursor, JobQuery
from tests.support.stores import started

from .rules import History, Report, Reported, Violation, check

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
            history.ledger[job.id] = await store.occurrences(OccurrenceQuery(job.id), limit=100_000)
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


async def check_store(store: JobStore, reports: list[Report]) -> tuple[History, list[Violation]]:
    """Start ``store``, read its history with ``reports`` and close it; check the history and
    print each violation with the job's history. The history and its violations."""
    async with started(store):
        history = await read_history(store, reports)
    violations = check(history)
    for violation in violations:
        print(describe(history, violation))
    return history, violations
