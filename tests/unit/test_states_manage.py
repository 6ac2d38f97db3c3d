"""The user-action transitions of jobscheduler.domain.states: what each expects and
writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import MAX_REPLAYS, Job, Replay, Status

from .conftest import make_job

NOW = datetime(2026, 9, 29, 18, 0, 0, 123456, tzinfo=UTC)
NOW_MS = datetime(2026, 9, 29, 18, 0, 0, 123000, tzinfo=UTC)


def cancel_requested(*, attempts: int, **fields: Any) -> Job:
    """A running job (claimed with token ``tok``, 5 attempts allowed) whose cancel was
    requested at ``NOW``."""
    return attrs.evolve(
        make_job(status=Status.RUNNING, attempts=attempts, max_attempts=5),
        claim_token="tok",
        cancel_requested_at=NOW_MS,
        **fields,
    )


def test_cancel_applies_from_any_status_no_executor_runs_yet() -> None:
    change = states.cancel(make_job(), now=NOW)
    assert change.expect == {
        "status": (Status.WAITING, Status.PENDING, Status.QUEUED, Status.CLAIMED, Status.PAUSED)
    }
    assert change.set == {
        "status": Status.CANCELLED,
        "claim_token": None,
        "updated_at": NOW_MS,
        "key_slot": None,
        "type_slot": None,
        "finished_at": NOW_MS,
    }


def test_request_cancel_is_fenced_by_the_running_attempts_token() -> None:
    job = attrs.evolve(make_job(status=Status.RUNNING), claim_token="tok")
    change = states.request_cancel(job, now=NOW)
    assert change.expect == {"status": Status.RUNNING, "claim_token": "tok"}
    assert change.set == {"cancel_requested_at": NOW_MS, "updated_at": NOW_MS}
    finish = states.finish_cancel(job, token="tok", now=NOW)
    assert finish.expect == {"status": Status.RUNNING, "claim_token": "tok"}
    assert finish.set["status"] is Status.CANCELLED


def test_recovering_a_lost_job_whose_cancel_was_requested_cancels_it() -> None:
    job = cancel_requested(attempts=0)
    change = states.recover(job, now=NOW)
    assert change.set["status"] is Status.CANCELLED
    plain = states.recover(attrs.evolve(job, cancel_requested_at=None), now=NOW)
    assert plain.set["status"] is Status.PENDING


def test_retry_resets_the_job_and_keeps_the_last_replays() -> None:
    old = tuple(
        Replay(at=NOW_MS - timedelta(days=i), previous_status=Status.DLQ)
        for i in range(MAX_REPLAYS, 0, -1)
    )
    job = attrs.evolve(make_job(status=Status.DLQ, attempts=3), last_error="boom", replays=old)
    change = states.retry(job, now=NOW, payload={"x": 1})
    assert change.expect == {"status": Status.DLQ, "updated_at": job.updated_at}
    replays = change.set["replays"]
    assert len(replays) == MAX_REPLAYS
    assert replays[:-1] == old[1:]  # the oldest dropped
    # Replays stored before runs were numbered count by their place: this is run 21.
    assert replays[-1] == Replay(
        at=NOW_MS,
        previous_status=Status.DLQ,
        previous_error="boom",
        previous_attempts=3,
        run=MAX_REPLAYS + 1,
    )
    assert (change.set["status"], change.set["attempts"], change.set["scheduled_at"]) == (
        Status.PENDING,
        0,
        NOW_MS,
    )
    assert change.set["payload"] == {"x": 1}
    assert "payload" not in states.retry(job, now=NOW).set


def test_runs_keep_counting_past_the_replays_a_job_remembers() -> None:
    job = make_job(status=Status.DLQ)
    assert job.run == 0
    for run in range(1, MAX_REPLAYS + 5):
        retried = attrs.evolve(job, **states.retry(job, now=NOW).set)
        assert retried.run == run
        assert len(retried.replays) == min(run, MAX_REPLAYS)
        job = attrs.evolve(retried, status=Status.DLQ)
    # The attempt records of the run in progress carry its number.
    running = attrs.evolve(job, status=Status.RUNNING, attempts=1)
    record = states.attempt_record(running, outcome=Outcome.FAILED, now=NOW)
    assert (record.run, record.number) == (job.run, 1)
    assert record.key == f"{job.id}:{job.run}:1:failed"


def test_template_transitions_name_the_status_they_leave() -> None:
    template = make_job(cron="0 * * * *")
    assert states.pause(template, now=NOW).expect["status"] is Status.PENDING
    resume = states.resume(template, next_at=NOW + timedelta(hours=1), now=NOW)
    assert resume.expect["status"] is Status.PAUSED
    assert resume.set["scheduled_at"] == NOW_MS + timedelta(hours=1)
    assert states.retire(template, now=NOW).expect["status"] == (
        Status.PENDING,
        Status.PAUSED,
        Status.DLQ,
    )
    update = states.update_template(template, fields={"priority": 3}, now=NOW)
    assert update.expect == {"status": Status.PENDING, "updated_at": template.updated_at}


def test_a_spawned_run_names_its_template() -> None:
    template = make_job(cron="0 * * * *")
    run = states.spawn_instance(template, fire_at=NOW, now=NOW)
    assert run.template_id == template.id
    assert run.cron is None


def test_finish_cancel_ends_the_started_attempt_with_a_cancelled_record() -> None:
    job = cancel_requested(attempts=2, claimed_by="w1")
    change = states.finish_cancel(job, token="tok", now=NOW)
    assert "attempts" not in change.set  # start counted it; a cancel neither adds nor takes back
    assert change.inc == {}
    assert change.record is not None
    assert (change.record.number, change.record.outcome, change.record.worker) == (
        2,
        Outcome.CANCELLED,
        "w1",
    )


def test_fail_and_release_need_no_cancel_request_beside_the_attempts_they_read() -> None:
    job = attrs.evolve(
        make_job(status=Status.RUNNING, attempts=2, max_attempts=5), claim_token="tok"
    )
    fail = states.fail(job, token="tok", now=NOW, error="boom")
    release = states.release(job, token="tok", now=NOW)
    for change in (fail, release):
        assert change.expect["cancel_requested_at"] is None
        assert change.expect["attempts"] == 2
    assert "attempts" not in fail.set  # counted when it started
    assert release.set["attempts"] == 1  # the started attempt is taken back


def test_recovering_a_lost_cancel_requested_job_keeps_its_count_and_records_it_lost() -> None:
    job = cancel_requested(attempts=1)
    change = states.recover(job, now=NOW)
    assert change.set["status"] is Status.CANCELLED
    assert "attempts" not in change.set
    assert change.expect["attempts"] == 1
    assert change.record is not None
    assert (change.record.number, change.record.outcome) == (1, Outcome.LOST)


def test_retry_resets_attempts_so_the_next_start_counts_one() -> None:
    job = attrs.evolve(make_job(status=Status.DLQ, attempts=3), last_error="boom")
    change = states.retry(job, now=NOW)
    assert change.set["attempts"] == 0
    assert change.inc == {}
    assert change.record is None  # no attempt ends here
    assert states.start(job.id, token="t", now=NOW).inc == {"attempts": 1}
