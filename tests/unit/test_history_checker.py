"""The fault suite's history checker: a clean history passes, and each broken promise is
named (so a scenario that breaks one fails)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Attempt, Outcome
from jobscheduler.domain.cron import CatchUp, CronPolicy, Occurrence, OccurrenceStatus, SkipReason
from jobscheduler.domain.model import Job, Replay, Status
from jobscheduler.store import JobStore
from tests.faults.history import (
    History,
    Report,
    Reported,
    Rule,
    check,
    describe,
    parse_reports,
    read_history,
)

from .conftest import make_job

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def attempt(
    job: Job, number: int, outcome: Outcome, start: float, end: float, run: int = 0
) -> Attempt:
    return Attempt(
        job_id=job.id,
        run=run,
        number=number,
        outcome=outcome,
        worker="executor-1",
        started_at=at(start),
        finished_at=at(end),
    )


def completed_job() -> tuple[Job, list[Attempt]]:
    job = attrs.evolve(
        make_job(scheduled_at=T0, created_at=T0), status=Status.COMPLETED, attempts=1
    )
    return job, [attempt(job, 1, Outcome.COMPLETED, 0.1, 0.2)]


def history_of(*jobs: tuple[Job, list[Attempt]], reports: list[Report] | None = None) -> History:
    history = History(read_at=at(3600), reports=reports or [])
    for job, records in jobs:
        history.jobs[job.id] = job
        history.attempts[job.id] = records
    return history


def rules(history: History) -> list[Rule]:
    return [v.rule for v in check(history)]


def report(job: Job, outcome: Reported = Reported.COMPLETED, seconds: float = 0.2) -> Report:
    return Report(at=at(seconds), job_id=job.id, outcome=outcome, source="executor-1")


def test_a_clean_history_has_no_violation() -> None:
    job, records = completed_job()
    retried = attrs.evolve(
        make_job(scheduled_at=T0, created_at=T0),
        status=Status.COMPLETED,
        attempts=2,
        scheduled_at=at(2.2),
    )
    retried_records = [
        attempt(retried, 1, Outcome.FAILED, 0.1, 0.2),
        attempt(retried, 2, Outcome.COMPLETED, 2.3, 2.4),
    ]
    history = history_of(
        (job, records),
        (retried, retried_records),
        reports=[report(job), report(retried, Reported.RETRIED), report(retried, seconds=2.4)],
    )
    assert check(history) == []


def test_a_completion_an_executor_saw_that_the_store_does_not_hold_is_a_lost_outcome() -> None:
    job, _ = completed_job()
    reverted = attrs.evolve(job, status=Status.PENDING, attempts=1)
    history = history_of((reverted, []), reports=[report(job)])
    assert Rule.LOST_OUTCOME in rules(history)


def test_a_completed_record_on_a_job_that_is_pending_again_left_its_final_status() -> None:
    job, records = completed_job()
    history = history_of((attrs.evolve(job, status=Status.PENDING), records), reports=[report(job)])
    assert {Rule.LOST_OUTCOME, Rule.LEFT_FINAL_STATUS} <= set(rules(history))


def test_two_completions_of_one_run_are_a_double_completion() -> None:
    job, records = completed_job()
    second = attempt(job, 2, Outcome.COMPLETED, 0.3, 0.4)
    history = history_of((job, [*records, second]), reports=[report(job), report(job, seconds=0.4)])
    assert Rule.DOUBLE_COMPLETION in rules(history)


def test_two_completion_lines_for_one_completed_run_are_a_double_completion() -> None:
    job, records = completed_job()
    history = history_of((job, records), reports=[report(job), report(job, seconds=0.5)])
    assert rules(history) == [Rule.DOUBLE_COMPLETION]


def test_a_retried_run_may_complete_again() -> None:
    job, records = completed_job()
    replay = Replay(at=at(9), previous_status=Status.COMPLETED, previous_attempts=1, run=1)
    replayed = attrs.evolve(job, replays=(replay,), attempts=1, scheduled_at=at(10))
    history = history_of(
        (replayed, [*records, attempt(job, 1, Outcome.COMPLETED, 10.1, 10.2, run=1)]),
        reports=[report(job), report(job, seconds=10.2)],
    )
    assert check(history) == []


def test_an_attempt_after_the_runs_completion_left_its_final_status() -> None:
    job, records = completed_job()
    later = attempt(job, 2, Outcome.LOST, 5, 11)
    history = history_of((attrs.evolve(job, attempts=2), [*records, later]))
    assert Rule.LEFT_FINAL_STATUS in rules(history)


def test_an_attempt_started_before_the_job_was_due_is_an_early_start() -> None:
    job, _ = completed_job()
    due_later = attrs.evolve(job, scheduled_at=at(5))
    history = history_of((due_later, [attempt(job, 1, Outcome.COMPLETED, 1, 2)]))
    assert rules(history) == [Rule.EARLY_START]


def test_a_cron_run_started_before_its_fire_time_is_an_early_start() -> None:
    job, _ = completed_job()
    run = attrs.evolve(job, template_id="t" * 24, fire_at=at(60), scheduled_at=at(0))
    history = history_of((run, [attempt(job, 1, Outcome.COMPLETED, 1, 2)]))
    assert Rule.EARLY_START in rules(history)


@pytest.mark.parametrize(
    ("started", "number"), [(None, 1), (0.1, 0), (0.1, 4)], ids=["no start", "zero", "past max"]
)
def test_an_attempt_that_never_started_is_a_phantom(started: float | None, number: int) -> None:
    job, _ = completed_job()
    record = attrs.evolve(
        attempt(job, number, Outcome.COMPLETED, 0.1, 0.2),
        started_at=None if started is None else at(started),
    )
    assert Rule.PHANTOM_ATTEMPT in rules(history_of((job, [record])))


def template_with_runs(
    fire_seconds: list[float], *, catch_up: CatchUp = CatchUp.ALL
) -> tuple[History, Job]:
    template = attrs.evolve(
        make_job(cron="* * * * *", created_at=T0, scheduled_at=at(60 * 4)),
        cron_policy=CronPolicy(catch_up=catch_up),
    )
    history = History(read_at=at(60 * 3 + 31))
    history.jobs[template.id] = template
    history.ledger[template.id] = []
    for seconds in fire_seconds:
        run = attrs.evolve(
            make_job(created_at=at(seconds), scheduled_at=at(seconds)),
            template_id=template.id,
            fire_at=at(seconds),
            status=Status.COMPLETED,
            attempts=1,
        )
        history.jobs[run.id] = run
        history.attempts[run.id] = [
            attempt(run, 1, Outcome.COMPLETED, seconds + 0.1, seconds + 0.2)
        ]
        history.ledger[template.id].append(
            Occurrence(
                template_id=template.id,
                tenant_id=template.tenant_id,
                fire_at=at(seconds),
                status=OccurrenceStatus.SPAWNED,
                recorded_at=at(seconds),
                run_id=run.id,
            )
        )
    return history, template


def missed(template: Job, seconds: float) -> Occurrence:
    """The ledger's record of ``template``'s fire time at ``seconds``, skipped as missed
    (recorded 50 s later)."""
    return Occurrence(
        template_id=template.id,
        tenant_id=template.tenant_id,
        fire_at=at(seconds),
        status=OccurrenceStatus.SKIPPED,
        recorded_at=at(seconds + 50),
        reason=SkipReason.MISSED,
    )


def test_one_run_per_fire_time_is_clean() -> None:
    history, _ = template_with_runs([60, 120, 180])
    assert check(history) == []


def test_two_runs_of_one_fire_time_are_a_double_run() -> None:
    history, _ = template_with_runs([60, 120, 120, 180])
    assert Rule.DOUBLE_RUN in rules(history)


def test_a_fire_time_without_a_run_or_a_record_is_a_missing_run() -> None:
    history, _ = template_with_runs([60, 180])
    assert rules(history) == [Rule.MISSING_RUN]


def test_under_catch_up_all_a_missed_fire_time_needs_a_run() -> None:
    history, template = template_with_runs([60, 180])
    history.ledger[template.id].append(missed(template, 120))
    assert rules(history) == [Rule.MISSING_RUN]
    history.ledger[template.id][-1] = attrs.evolve(
        history.ledger[template.id][-1], reason=SkipReason.PAUSED
    )
    assert check(history) == []


def test_under_catch_up_none_a_recorded_miss_is_no_violation() -> None:
    history, template = template_with_runs([60, 180], catch_up=CatchUp.NONE)
    history.ledger[template.id].append(missed(template, 120))
    assert check(history) == []


def test_a_spawned_record_whose_run_does_not_exist_is_a_missing_run() -> None:
    history, template = template_with_runs([60, 120, 180])
    run_id = history.ledger[template.id][0].run_id
    assert run_id is not None
    del history.jobs[run_id]
    assert Rule.MISSING_RUN in rules(history)


def test_reports_are_read_from_text_and_json_logs() -> None:
    job_id = "6b0f36a7f34642fff7bd437a"
    text = (
        f"2026-12-01T12:00:00.250Z debug   job completed logger=x role=executor "
        f"job_id={job_id} tenant=t job_type=noop\n"
        f"2026-12-01T12:00:01.000Z info    job failed; will retry job_id={job_id} "
        f'error="ValueError: boom" attempts=1\n'
        f'{{"ts": "2026-12-01T12:00:02.000Z", "msg": "job dead-lettered", "job_id": "{job_id}"}}\n'
        "2026-12-01T12:00:03.000Z debug   dispatched job_id=x\n"
    )
    reports = parse_reports(text, "executor-1")
    assert [(r.outcome, r.at) for r in reports] == [
        (Reported.COMPLETED, datetime(2026, 12, 1, 12, 0, 0, 250000, tzinfo=UTC)),
        (Reported.RETRIED, datetime(2026, 12, 1, 12, 0, 1, tzinfo=UTC)),
        (Reported.DEAD_LETTERED, datetime(2026, 12, 1, 12, 0, 2, tzinfo=UTC)),
    ]
    assert {r.job_id for r in reports} == {job_id}


def test_a_violation_is_described_with_the_jobs_whole_history() -> None:
    job, records = completed_job()
    history = history_of((attrs.evolve(job, status=Status.PENDING), records), reports=[report(job)])
    [first, *_] = check(history)
    text = describe(history, first)
    assert text.startswith(f"VIOLATION {first.rule}: job {job.id}")
    assert '"status": "pending"' in text
    assert '"outcome": "completed"' in text
    assert "reported completed" in text


async def test_a_history_read_from_a_store_after_a_clean_run_has_no_violation(
    store: JobStore,
) -> None:
    job = make_job(scheduled_at=T0, created_at=T0)
    await store.insert(job)
    assert [j.id for j in await store.claim_due(at(0.01), 1)] == [job.id]
    picked = await store.apply(states.pick(job.id, worker="executor-1", token="t", now=at(0.02)))
    assert picked is not None
    running = await store.apply(states.start(job.id, token="t", now=at(0.03)))
    assert running is not None
    done = await store.apply(states.complete(running, token="t", now=at(0.04)))
    assert done is not None
    assert done.status is Status.COMPLETED

    history = await read_history(store, [report(job, seconds=0.04)], read_at=at(60))

    assert list(history.jobs) == [job.id]
    assert [a.outcome for a in history.attempts[job.id]] == [Outcome.COMPLETED]
    assert check(history) == []
