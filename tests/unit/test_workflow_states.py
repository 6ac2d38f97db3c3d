"""The workflows' transitions: each a conditional update of one step or one record, and the
mark every end of a step leaves for its workflow."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Failure
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.steps import Step
from jobscheduler.domain.workflows import (
    OUTCOMES,
    DeclaredStep,
    Workflow,
    WorkflowStatus,
    workflow_to_json,
)

from .conftest import make_job

NOW = datetime(2026, 9, 29, 18, 0, 0, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)


def step(status: Status = Status.WAITING, **fields: object) -> Job:
    job = make_job(status=status)
    return attrs.evolve(
        job, workflow_id="w" * 24, step=Step(name="b", parents=("p" * 24,)), **fields
    )


def test_release_moves_a_waiting_step_to_pending_fenced_on_the_version_read() -> None:
    waiting = step(scheduled_at=NOW - timedelta(days=1))
    change = states.release_step(waiting, now=NOW)
    assert change.expect == {"status": Status.WAITING, "updated_at": waiting.updated_at}
    assert change.set["status"] is Status.PENDING
    assert change.set["scheduled_at"] == NOW
    assert change.set["step_dirty"] is False


def test_a_release_keeps_a_due_time_later_than_now() -> None:
    change = states.release_step(step(scheduled_at=LATER), now=NOW)
    assert change.set["scheduled_at"] == LATER


def test_cancel_step_says_why_and_marks_the_step_for_its_own_children() -> None:
    change = states.cancel_step(step(), now=NOW, reason="parent a ended in dlq")
    assert change.expect["status"] is Status.WAITING
    assert change.set["status"] is Status.CANCELLED
    assert change.set["last_error"] == "parent a ended in dlq"
    assert change.set["step_dirty"] is True


def test_retry_step_waits_again_with_attempts_reset_and_a_replay_kept() -> None:
    failed = step(Status.DLQ, attempts=3, last_error="boom")
    change = states.retry_step(failed, now=NOW)
    assert change.expect == {"status": Status.DLQ, "updated_at": failed.updated_at}
    assert change.set["status"] is Status.WAITING
    assert change.set["attempts"] == 0
    assert change.set["step_dirty"] is True
    [replay] = change.set["replays"]
    assert (replay.previous_status, replay.previous_error, replay.run) == (Status.DLQ, "boom", 1)


def test_settle_clears_the_mark_only_on_the_version_it_acted_on() -> None:
    done = step(Status.COMPLETED, step_dirty=True)
    change = states.settle_step(done)
    assert change.expect == {
        "status": Status.COMPLETED,
        "updated_at": done.updated_at,
        "step_dirty": True,
    }
    assert change.set == {"step_dirty": False}


@pytest.mark.parametrize(
    "ending",
    [
        lambda job: states.complete(job, token="t", now=NOW),
        lambda job: states.fail(job, token="t", now=NOW, error="x", permanent=True),
        lambda job: states.finish_cancel(job, token="t", now=NOW),
        lambda job: states.cancel(attrs.evolve(job, status=Status.PENDING), now=NOW),
        lambda job: states.recover(attrs.evolve(job, attempts=3), now=NOW),
    ],
)
def test_every_end_of_a_step_marks_it_for_its_workflow(ending: object) -> None:
    running = step(Status.RUNNING, claim_token="t", attempts=1)
    change = ending(running)  # type: ignore[operator]
    assert change.set["status"] in states.FINAL
    assert change.set["step_dirty"] is True


def test_a_failed_attempt_with_retries_left_or_a_plain_job_is_not_marked() -> None:
    running = step(Status.RUNNING, claim_token="t", attempts=1)
    retried = states.fail(running, token="t", now=NOW, error=Failure(type="E", message="x"))
    assert retried.set["status"] is Status.PENDING
    assert "step_dirty" not in retried.set
    plain = attrs.evolve(make_job(status=Status.RUNNING), claim_token="t")
    assert "step_dirty" not in states.complete(plain, token="t", now=NOW).set


def test_note_spawns_is_fenced_on_the_attempts_claim_token() -> None:
    change = states.note_spawns(step(Status.RUNNING), token="tok")
    assert change.expect == {"status": Status.RUNNING, "claim_token": "tok"}
    assert change.set["step"].spawns is True


def record(**fields: object) -> Workflow:
    values: dict[str, object] = {
        "id": "w" * 24,
        "tenant_id": "t",
        "idempotency_key": "k",
        "status": WorkflowStatus.RUNNING,
        "steps": (),
        "version": 2,
        "created_at": NOW,
        "updated_at": NOW,
    }
    values.update(fields)
    return Workflow(**values)  # type: ignore[arg-type]


def test_a_finish_is_fenced_on_the_version_read_so_a_reopen_wins() -> None:
    change = states.finish_workflow(record(), status=WorkflowStatus.FAILED, now=LATER)
    assert change.expect == {"status": WorkflowStatus.RUNNING, "version": 2}
    assert change.set["status"] is WorkflowStatus.FAILED
    reopen = states.reopen_workflow(record(status=WorkflowStatus.FAILED), now=LATER)
    assert reopen.expect == {"status": WorkflowStatus.FAILED, "version": 2}
    assert reopen.set["version"] == 3
    assert reopen.set["status"] is WorkflowStatus.RUNNING


def test_a_cancel_request_is_a_new_version_and_open_and_abandon_need_creating() -> None:
    cancel = states.request_workflow_cancel(record(), now=LATER)
    assert cancel.set["version"] == 3
    assert cancel.set["cancel_requested_at"] == LATER
    creating = record(status=WorkflowStatus.CREATING)
    assert states.open_workflow(creating, now=LATER).expect == {"status": WorkflowStatus.CREATING}
    abandon = states.abandon_workflow(creating, now=LATER, reason="never stored")
    assert abandon.set["status"] is WorkflowStatus.CANCELLED


@pytest.mark.parametrize(
    ("statuses", "outcome"),
    [
        ([Status.COMPLETED, Status.COMPLETED], WorkflowStatus.COMPLETED),
        ([Status.COMPLETED, Status.DLQ, Status.CANCELLED], WorkflowStatus.FAILED),
        ([Status.COMPLETED, Status.CANCELLED], WorkflowStatus.CANCELLED),
        ([Status.COMPLETED, Status.WAITING], None),
        ([Status.DLQ, Status.RUNNING], None),
    ],
)
def test_a_workflow_follows_its_steps(
    statuses: list[Status], outcome: WorkflowStatus | None
) -> None:
    # As the settle asks the store: the first group one of the steps is in decides.
    found = [then for group, then in OUTCOMES if set(group) & set(statuses)]
    assert (found[0] if found else WorkflowStatus.COMPLETED) is outcome


def test_every_status_but_completed_is_in_one_outcome_group() -> None:
    grouped = [status for group, _ in OUTCOMES for status in group]
    assert sorted(grouped) == sorted(set(Status) - {Status.COMPLETED})


def test_the_json_lists_every_step_with_its_status_and_dependencies_by_name() -> None:
    a = attrs.evolve(make_job(status=Status.COMPLETED), workflow_id="w" * 24)
    b = attrs.evolve(make_job(status=Status.WAITING), workflow_id="w" * 24)
    a = attrs.evolve(a, step=Step(name="a", children=(b.id,)))
    b = attrs.evolve(b, step=Step(name="b", parents=(a.id,)))
    workflow = record(
        steps=(
            DeclaredStep(name="a", job_id=a.id),
            DeclaredStep(name="b", job_id=b.id, depends_on=("a",)),
        )
    )
    out = workflow_to_json(workflow, [b, a])
    assert out["status"] == "running"
    assert [(s["name"], s["status"], s["dependsOn"]) for s in out["steps"]] == [
        ("a", "completed", []),
        ("b", "waiting", ["a"]),
    ]
    assert out["counts"] == {"completed": 1, "waiting": 1}
