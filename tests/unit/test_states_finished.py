"""``finished_at``: stamped by every transition that ends a job, cleared by one that
revives it, whatever the transition (one rule in :class:`~jobscheduler.domain.states.Change`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status, job_to_json

from .conftest import make_job

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def running(max_attempts: int = 3) -> Job:
    job = make_job(status=Status.RUNNING)
    return attrs.evolve(job, claim_token="t", attempts=1, max_attempts=max_attempts)


def test_complete_stamps_finished_at_with_its_update_time() -> None:
    change = states.complete(running(), token="t", now=NOW)
    assert change.set["finished_at"] == NOW


def test_a_failure_that_dead_letters_stamps_finished_at_and_one_that_retries_does_not() -> None:
    last = states.fail(running(max_attempts=1), token="t", now=NOW, error="boom")
    again = states.fail(running(max_attempts=3), token="t", now=NOW, error="boom")
    assert last.set["status"] is Status.DLQ
    assert last.set["finished_at"] == NOW
    assert again.set["status"] is Status.PENDING
    assert "finished_at" not in again.set  # pending already, since it started


def test_cancel_stamps_finished_at_and_a_retry_clears_it() -> None:
    cancel = states.cancel(make_job(), now=NOW)
    assert cancel.set["finished_at"] == NOW
    cancelled = attrs.evolve(make_job(status=Status.CANCELLED), finished_at=NOW)
    retry = states.retry(cancelled, now=NOW + timedelta(hours=1))
    assert retry.set["status"] is Status.PENDING
    assert retry.set["finished_at"] is None


def test_a_change_that_writes_no_status_leaves_finished_at_alone() -> None:
    beat = states.heartbeat("j", token="t", now=NOW)
    assert "finished_at" not in beat.set


def test_a_finished_job_shows_when_it_finished() -> None:
    done = attrs.evolve(make_job(status=Status.COMPLETED), finished_at=NOW)
    assert job_to_json(done)["finishedAt"] == "2026-03-01T12:00:00Z"
    assert "finishedAt" not in job_to_json(make_job())
