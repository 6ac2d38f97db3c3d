"""The state machine: what each transition expects and what it writes.

Each transition is a pure function; these tests pin its conditions (status, claim token,
and the extra fields that make races safe) and the fields it sets.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest

from jobscheduler.client import FINAL_STATUSES
from jobscheduler.domain import states
from jobscheduler.domain.attempts import Attempt, Failure, Outcome
from jobscheduler.domain.model import MAX_ERROR_LENGTH, Job, Status

from .conftest import make_job

#: What every transition out of queued/claimed/running also writes: the slots it held.
FREED_SLOTS = {"key_slot": None, "type_slot": None}
NOW = datetime(2026, 9, 29, 18, 0, 0, 123456, tzinfo=UTC)
NOW_MS = datetime(2026, 9, 29, 18, 0, 0, 123000, tzinfo=UTC)
TOKEN = "token-1"


def running(**overrides: object) -> Job:
    job = make_job(status=Status.RUNNING)
    fields: dict[str, object] = {
        "claim_token": TOKEN,
        "claimed_by": "worker-1",
        "claimed_at": NOW_MS - timedelta(seconds=5),
        "heartbeat_at": NOW_MS - timedelta(seconds=1),
    }
    fields.update(overrides)
    return attrs.evolve(job, **fields)


def test_claim_fields_move_pending_to_queued_and_stamp_queued_at() -> None:
    assert states.claim_fields(NOW) == {
        "status": Status.QUEUED,
        "queued_at": NOW_MS,
        "updated_at": NOW_MS,
    }


def test_pick_expects_queued_and_records_the_claim() -> None:
    change = states.pick("job-1", worker="worker-1", token=TOKEN, now=NOW)
    assert change.transition == "pick"
    assert change.job_id == "job-1"
    assert change.expect == {"status": Status.QUEUED}
    assert change.set == {
        "status": Status.CLAIMED,
        "claimed_by": "worker-1",
        "claimed_at": NOW_MS,
        "claim_token": TOKEN,
        "heartbeat_at": NOW_MS,
        "updated_at": NOW_MS,
    }


def test_start_expects_claimed_with_the_same_token_and_counts_the_attempt() -> None:
    change = states.start("job-1", token=TOKEN, now=NOW)
    assert change.transition == "start"
    assert change.expect == {"status": Status.CLAIMED, "claim_token": TOKEN}
    assert change.set == {"status": Status.RUNNING, "heartbeat_at": NOW_MS, "updated_at": NOW_MS}
    assert change.inc == {"attempts": 1}
    assert change.record is None


def test_heartbeat_expects_running_with_the_token_and_only_refreshes_times() -> None:
    change = states.heartbeat("job-1", token=TOKEN, now=NOW)
    assert change.transition == "heartbeat"
    assert change.expect == {"status": Status.RUNNING, "claim_token": TOKEN}
    assert change.set == {"heartbeat_at": NOW_MS, "updated_at": NOW_MS}


def test_complete_expects_running_with_the_token_and_drops_the_token() -> None:
    job = running()
    change = states.complete(job, token=TOKEN, now=NOW)
    assert change.transition == "complete"
    assert change.job_id == job.id
    assert change.expect == {"status": Status.RUNNING, "claim_token": TOKEN}
    assert change.set == {
        "status": Status.COMPLETED,
        "claim_token": None,
        "updated_at": NOW_MS,
        **FREED_SLOTS,
        "finished_at": NOW_MS,
    }
    assert change.record == Attempt(
        job_id=job.id,
        number=1,
        outcome=Outcome.COMPLETED,
        worker="worker-1",
        started_at=job.claimed_at,
        finished_at=NOW_MS,
    )


def test_complete_stores_the_result_when_there_is_one() -> None:
    change = states.complete(running(), token=TOKEN, now=NOW, result={"sent": 3})
    assert change.set["result"] == {"sent": 3}


@pytest.mark.parametrize(
    ("attempts", "backoff"),
    [(1, 2), (2, 4), (3, 8), (6, 64), (9, 300), (21, 300)],
)
def test_fail_below_max_attempts_backs_off_without_counting_again(
    attempts: int, backoff: int
) -> None:
    job = running(attempts=attempts, max_attempts=100)
    change = states.fail(job, token=TOKEN, now=NOW, error="boom")
    assert change.transition == "fail"
    assert change.expect == {
        "status": Status.RUNNING,
        "claim_token": TOKEN,
        "attempts": attempts,
        "cancel_requested_at": None,  # a cancel request wins over a retry
    }
    assert change.set == {
        "status": Status.PENDING,
        "last_error": "boom",
        "claim_token": None,
        "scheduled_at": NOW_MS + timedelta(seconds=backoff),
        "updated_at": NOW_MS,
        **FREED_SLOTS,
    }
    assert change.inc == {}


@pytest.mark.parametrize(("attempts", "max_attempts"), [(3, 3), (1, 1), (5, 5), (6, 3)])
def test_fail_reaching_max_attempts_dead_letters(attempts: int, max_attempts: int) -> None:
    job = running(attempts=attempts, max_attempts=max_attempts)
    change = states.fail(job, token=TOKEN, now=NOW, error="boom")
    assert change.set["status"] is Status.DLQ
    assert "attempts" not in change.set
    assert change.set["last_error"] == "boom"
    assert change.set["claim_token"] is None
    assert "scheduled_at" not in change.set


def test_fail_records_the_failure_with_its_type_message_and_traceback() -> None:
    try:
        raise KeyError("to")
    except KeyError as exc:
        failure = Failure.from_exception(exc)
    job = running(attempts=2, max_attempts=3)
    change = states.fail(job, token=TOKEN, now=NOW, error=failure, outcome=Outcome.TIMED_OUT)
    assert change.set["last_error"] == "KeyError: 'to'"
    record = change.record
    assert record is not None
    assert (record.number, record.outcome, record.worker) == (2, Outcome.TIMED_OUT, "worker-1")
    assert (record.error_type, record.error_message) == ("KeyError", "'to'")
    assert record.traceback is not None
    assert record.traceback.startswith("Traceback")
    assert record.traceback.rstrip().endswith("KeyError: 'to'")


def test_fail_truncates_very_long_errors() -> None:
    change = states.fail(running(), token=TOKEN, now=NOW, error="x" * 10_000)
    assert len(change.set["last_error"]) == MAX_ERROR_LENGTH
    assert change.set["last_error"].endswith("…")


@pytest.mark.parametrize("attempts", [1, 3])
def test_release_of_a_running_job_takes_its_started_attempt_back(attempts: int) -> None:
    job = running(attempts=attempts)
    change = states.release(job, token=TOKEN, now=NOW)
    assert change.transition == "release"
    assert change.expect == {
        "status": Status.RUNNING,
        "claim_token": TOKEN,
        "attempts": attempts,
        "cancel_requested_at": None,  # a job asked to stop is cancelled, not handed back
    }
    assert change.set == {
        "status": Status.PENDING,
        "scheduled_at": NOW_MS,
        "attempts": attempts - 1,
        "claim_token": None,
        "updated_at": NOW_MS,
        **FREED_SLOTS,
    }
    assert change.record is not None
    assert (change.record.number, change.record.outcome) == (attempts, Outcome.RELEASED)


def test_release_of_a_claimed_job_leaves_attempts_alone() -> None:
    change = states.release(running(status=Status.CLAIMED, attempts=1), token=TOKEN, now=NOW)
    assert change.expect == {
        "status": (Status.CLAIMED, Status.RUNNING),
        "claim_token": TOKEN,
        "cancel_requested_at": None,
    }
    assert "attempts" not in change.set
    assert change.record is not None
    assert change.record.number == 2  # the attempt it was about to start


def test_requeue_is_conditioned_on_the_observed_queued_at_and_keeps_attempts() -> None:
    queued_at = NOW_MS - timedelta(seconds=31)
    job = attrs.evolve(make_job(status=Status.QUEUED, attempts=2), queued_at=queued_at)
    change = states.requeue(job, now=NOW)
    assert change.transition == "requeue"
    assert change.expect == {"status": Status.QUEUED, "queued_at": queued_at}
    assert change.set == {
        "status": Status.PENDING,
        "queued_at": None,
        "updated_at": NOW_MS,
        **FREED_SLOTS,
    }


def test_recover_of_a_running_job_fails_its_started_attempt_and_says_lost() -> None:
    job = running(attempts=2, max_attempts=3)
    change = states.recover(job, now=NOW)
    assert change.transition == "recover"
    assert change.expect == {
        "status": Status.RUNNING,
        "claim_token": TOKEN,
        "heartbeat_at": job.heartbeat_at,
        "attempts": 2,
    }
    assert change.set["status"] is Status.PENDING
    assert "attempts" not in change.set  # counted when it started
    assert change.set["scheduled_at"] == NOW_MS + timedelta(seconds=4)
    assert change.set["claim_token"] is None
    assert change.set["last_error"].startswith("lost: executor worker-1 stopped heartbeating")
    assert job.heartbeat_at is not None
    assert job.heartbeat_at.isoformat() in change.set["last_error"]
    assert change.record is not None
    assert (change.record.number, change.record.outcome) == (2, Outcome.LOST)
    assert change.record.error_message == change.set["last_error"]


def test_recover_of_a_job_never_started_repends_it_at_once_uncounted() -> None:
    job = running(status=Status.CLAIMED, attempts=1, max_attempts=1)
    change = states.recover(job, now=NOW)
    assert change.set["status"] is Status.PENDING
    assert change.set["scheduled_at"] == NOW_MS
    assert "attempts" not in change.set
    assert change.record is not None
    assert (change.record.number, change.record.outcome) == (2, Outcome.LOST)


def test_recover_at_max_attempts_dead_letters() -> None:
    change = states.recover(running(attempts=3, max_attempts=3), now=NOW)
    assert change.set["status"] is Status.DLQ
    assert change.set["last_error"].startswith("lost:")


def test_recover_of_a_job_that_never_heartbeat_expects_a_null_heartbeat() -> None:
    job = running(heartbeat_at=None, claimed_by=None)
    change = states.recover(job, now=NOW)
    assert change.expect["heartbeat_at"] is None
    assert "executor ? stopped heartbeating (last heartbeat never)" in change.set["last_error"]


def test_advance_template_is_conditioned_on_the_version_read_fire_time_expression_and_edit() -> (
    None
):
    old = datetime(2026, 9, 29, 2, 0, tzinfo=UTC)
    template = make_job(cron="0 2 * * *", scheduled_at=old)
    next_at = datetime(2026, 9, 30, 2, 0, tzinfo=UTC)
    change = states.advance_template(template, next_at=next_at, now=NOW)
    assert change.transition == "advance_template"
    assert change.job_id == template.id
    assert change.expect == {
        "status": Status.PENDING,
        "scheduled_at": old,
        "cron": "0 2 * * *",
        "updated_at": template.updated_at,
    }
    assert change.set == {"scheduled_at": next_at, "updated_at": NOW_MS}


def test_dead_letter_template_is_conditioned_on_the_version_read_and_records_why() -> None:
    template = make_job(cron="not a cron", scheduled_at=NOW_MS)
    change = states.dead_letter_template(template, error="cron: invalid", now=NOW)
    assert change.transition == "dead_letter_template"
    assert change.expect == {
        "status": Status.PENDING,
        "scheduled_at": NOW_MS,
        "cron": "not a cron",
        "updated_at": template.updated_at,
    }
    assert change.set == {
        "status": Status.DLQ,
        "last_error": "cron: invalid",
        "updated_at": NOW_MS,
        **FREED_SLOTS,
        "finished_at": NOW_MS,
    }


def test_instance_key_is_template_key_run_unix_nanoseconds_of_the_fire_time() -> None:
    template = make_job(key="nightly-report", cron="0 2 * * *")
    fire_at = datetime(2026, 9, 30, 2, 0, tzinfo=UTC)
    assert states.instance_key(template, fire_at) == "nightly-report-run-1790733600000000000"


def test_instance_key_is_the_same_for_the_same_fire_time_in_any_zone() -> None:
    template = make_job(key="k", cron="0 2 * * *")
    utc_fire = datetime(2026, 9, 30, 2, 0, tzinfo=UTC)
    local_fire = utc_fire.astimezone(datetime.now().astimezone().tzinfo)
    assert states.instance_key(template, utc_fire) == states.instance_key(template, local_fire)
    later = states.instance_key(template, utc_fire + timedelta(milliseconds=1))
    assert later == "k-run-1790733600001000000"


def test_instance_key_before_the_epoch_is_negative_nanoseconds() -> None:
    template = make_job(key="k", cron="0 2 * * *")
    assert states.instance_key(template, datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)) == (
        "k-run--1000000000"
    )


def test_spawn_instance_copies_the_template_as_a_one_off_at_the_fire_time() -> None:
    template = make_job(
        key="nightly",
        tenant="tenant-b",
        job_type="log-message",
        payload={"message": "hi", "nested": {"a": 1}},
        priority=7,
        max_attempts=5,
        cron="0 2 * * *",
    )
    fire_at = datetime(2026, 9, 30, 2, 0, tzinfo=UTC)
    instance = states.spawn_instance(template, fire_at=fire_at, now=NOW)
    assert instance.id != template.id
    assert instance.idempotency_key == states.instance_key(template, fire_at)
    assert instance.cron is None
    assert instance.status is Status.PENDING
    assert instance.scheduled_at == fire_at
    assert (instance.tenant_id, instance.job_type, instance.priority) == (
        "tenant-b",
        "log-message",
        7,
    )
    assert instance.payload == template.payload
    assert instance.payload is not template.payload
    assert instance.max_attempts == 5
    assert instance.attempts == 0
    assert instance.template_id == template.id  # cron runs name their template
    assert instance.created_at == instance.updated_at == NOW_MS


def test_every_status_is_unfinished_final_or_paused_and_in_one_set_only() -> None:
    unfinished, final = set(states.UNFINISHED), set(states.FINAL)
    assert not unfinished & final
    assert unfinished | final | {Status.PAUSED} == set(Status)
    assert Status.PAUSED not in unfinished | final


def test_in_flight_cancellable_and_retryable_sit_where_their_transitions_need_them() -> None:
    assert set(states.IN_FLIGHT) <= set(states.UNFINISHED)
    assert set(states.RETRYABLE) <= set(states.FINAL)
    assert Status.RUNNING not in states.CANCELLABLE  # a running job is asked to stop instead
    assert set(states.CANCELLABLE) <= set(states.UNFINISHED) | {Status.PAUSED}


def test_the_clients_final_statuses_are_the_state_machines() -> None:
    # The client is HTTP-only and keeps its own copy as strings; it must not drift.
    assert {status.value for status in states.FINAL} == FINAL_STATUSES
