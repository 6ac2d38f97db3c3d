"""``POST /workflows`` validated as a whole: the plan of a valid create, and the 400 each
kind of problem gets (nothing is built for an invalid one)."""

from __future__ import annotations

from typing import Any

import pytest

from jobscheduler.domain.model import Status
from jobscheduler.domain.steps import MAX_STEPS, OnParentFailure
from jobscheduler.domain.workflows import (
    WorkflowPlan,
    WorkflowStatus,
    parse_workflow_request,
    same_shape,
)
from jobscheduler.errors import ValidationError

from .model_support import JOB_TYPES, NOW


def body(steps: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"tenantId": "t", "idempotencyKey": "etl-1", "steps": steps}
    values.update(overrides)
    return {k: v for k, v in values.items() if v is not None}


def plan(raw: Any, **kwargs: Any) -> WorkflowPlan:
    return parse_workflow_request(raw, now=NOW, job_types=JOB_TYPES, **kwargs)


def rejected(raw: Any, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        plan(raw)


DIAMOND = [
    {"name": "a", "jobType": "noop"},
    {"name": "b", "jobType": "noop", "dependsOn": ["a"]},
    {"name": "c", "jobType": "noop", "dependsOn": ["a"]},
    {"name": "d", "jobType": "noop", "dependsOn": ["b", "c"]},
]


def test_a_diamond_becomes_a_creating_record_and_waiting_steps_linked_both_ways() -> None:
    made = plan(body(DIAMOND))
    workflow = made.workflow
    assert workflow.status is WorkflowStatus.CREATING
    assert [s.name for s in workflow.steps] == ["a", "b", "c", "d"]
    jobs = {job.step.name: job for job in made.jobs if job.step is not None}
    assert all(job.status is Status.WAITING for job in made.jobs)
    assert all(job.workflow_id == workflow.id for job in made.jobs)
    a, b, c, d = (jobs[n] for n in "abcd")
    assert a.step is not None
    assert b.step is not None
    assert d.step is not None
    assert a.step.parents == ()
    assert set(a.step.children) == {b.id, c.id}
    assert d.step.parents == (b.id, c.id)
    assert b.step.children == (d.id,)
    assert [s.job_id for s in workflow.steps] == [a.id, b.id, c.id, d.id]


def test_only_the_roots_are_marked_for_release_and_keys_derive_from_the_workflows() -> None:
    made = plan(body(DIAMOND))
    assert [job.step.name for job in made.roots if job.step] == ["a"]
    assert {job.step.name: job.step_dirty for job in made.jobs if job.step} == {
        "a": True,
        "b": False,
        "c": False,
        "d": False,
    }
    assert [job.idempotency_key for job in made.jobs] == [
        "etl-1/a",
        "etl-1/b",
        "etl-1/c",
        "etl-1/d",
    ]


def test_a_step_is_an_ordinary_job_body_due_now_unless_it_says() -> None:
    made = plan(
        body(
            [
                {"name": "a", "jobType": "log-message", "payload": {"message": "hi"}},
                {
                    "name": "b",
                    "jobType": "noop",
                    "scheduledAt": "2026-09-30T00:00:00Z",
                    "priority": 7,
                    "maxAttempts": 5,
                    "dependsOn": ["a"],
                },
            ]
        )
    )
    a, b = made.jobs
    assert a.scheduled_at == NOW
    assert a.payload == {"message": "hi"}
    assert b.scheduled_at.isoformat() == "2026-09-30T00:00:00+00:00"
    assert (b.priority, b.max_attempts, b.tenant_id) == (7, 5, "t")


def test_after_children_of_waits_for_the_spawner_and_is_its_chord() -> None:
    made = plan(
        body(
            [
                {"name": "plan", "jobType": "noop"},
                {"name": "sum", "jobType": "noop", "afterChildrenOf": ["plan"]},
                {"name": "tidy", "jobType": "noop", "dependsOn": ["sum"], "onParentFailure": "run"},
            ]
        )
    )
    spawner, total, tidy = made.jobs
    assert spawner.step is not None
    assert total.step is not None
    assert tidy.step is not None
    assert total.step.parents == (spawner.id,)
    assert total.step.after_children_of == (spawner.id,)
    assert spawner.step.chords == (total.id,)
    assert spawner.step.children == (total.id,)
    assert tidy.step.on_parent_failure is OnParentFailure.RUN
    assert made.workflow.steps[1].after_children_of == ("plan",)


def test_given_ids_are_kept_so_a_repeated_create_rebuilds_the_same_workflow() -> None:
    first = plan(body(DIAMOND))
    ids = {s.name: s.job_id for s in first.workflow.steps}
    again = plan(body(DIAMOND), workflow_id=first.workflow.id, job_ids=ids)
    assert again.workflow.id == first.workflow.id
    assert [job.id for job in again.jobs] == [job.id for job in first.jobs]
    assert same_shape(first.workflow, again)
    other = plan(body([*DIAMOND[:3], {"name": "d", "jobType": "noop", "dependsOn": ["b"]}]))
    assert not same_shape(first.workflow, other)


@pytest.mark.parametrize(
    ("steps", "match"),
    [
        ([], r"steps: a non-empty list"),
        ([{"name": "a", "jobType": "noop", "dependsOn": ["x"]}], r"dependsOn: unknown step 'x'"),
        (
            [{"name": "a", "jobType": "noop", "afterChildrenOf": ["nope"]}],
            r"afterChildrenOf: unknown step 'nope'",
        ),
        ([{"name": "a", "jobType": "noop", "dependsOn": ["a"]}], r"cannot wait for itself"),
        (
            [{"name": "a", "jobType": "noop"}, {"name": "a", "jobType": "noop"}],
            r"steps\[1\].name: 'a' names two steps",
        ),
        ([{"name": "a/b", "jobType": "noop"}], r"must not contain '/'"),
        ([{"jobType": "noop"}], r"steps\[0\].name is required"),
        ([{"name": "a", "jobType": "nope"}], r"steps\[0\] \(a\): jobType: unknown job type"),
        ([{"name": "a", "jobType": "noop", "cron": "* * * * *"}], r"unknown field\(s\): cron"),
        (
            [{"name": "a", "jobType": "noop", "onParentFailure": "shrug"}],
            r"onParentFailure: one of cancel, run",
        ),
        (
            [
                {"name": "a", "jobType": "noop", "dependsOn": ["c"]},
                {"name": "b", "jobType": "noop", "dependsOn": ["a"]},
                {"name": "c", "jobType": "noop", "dependsOn": ["b"]},
            ],
            r"a cycle, each waiting for the next: a -> c -> b -> a",
        ),
    ],
)
def test_a_problem_is_a_400_naming_it(steps: list[dict[str, Any]], match: str) -> None:
    rejected(body(steps), match)


def test_more_than_the_step_limit_is_refused() -> None:
    steps = [{"name": f"s{i}", "jobType": "noop"} for i in range(MAX_STEPS + 1)]
    rejected(body(steps), rf"at most {MAX_STEPS} steps \(got {MAX_STEPS + 1}\)")
    assert len(plan(body(steps[:MAX_STEPS])).jobs) == MAX_STEPS


def test_the_workflow_needs_a_tenant_a_key_and_nothing_else() -> None:
    rejected(body(DIAMOND, tenantId=None), "tenantId is required")
    rejected(body(DIAMOND, idempotencyKey=None), "idempotencyKey is required")
    rejected(body(DIAMOND, idempotencyKey="k" * 129), "longer than 128")
    rejected(body(DIAMOND, name="x"), r"unknown field\(s\): name")
    rejected([], "must be a JSON object")
