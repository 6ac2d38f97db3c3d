"""jobscheduler.testing's job factory: a pending job as a store holds it, with the factory's
defaults and any field a test names."""

from __future__ import annotations

from datetime import UTC, datetime

from jobscheduler.domain.model import Status, is_job_id
from jobscheduler.testing import DEFAULT_TIME, JobFactory, make_job


def test_a_job_is_a_pending_noop_created_and_due_at_the_default_time_with_a_fresh_key() -> None:
    first, second = make_job(), make_job()
    assert is_job_id(first.id)
    assert first.id != second.id
    assert first.idempotency_key == f"key-{first.id}"
    assert (first.tenant_id, first.job_type, first.status) == ("tenant-a", "noop", Status.PENDING)
    assert first.scheduled_at == first.created_at == first.updated_at == DEFAULT_TIME
    assert (first.payload, first.attempts, first.max_attempts) == ({}, 0, 3)


def test_a_factory_s_time_and_payload_are_its_jobs_defaults_and_each_job_has_its_own_copy() -> None:
    at = datetime(2026, 9, 29, 18, tzinfo=UTC)
    factory = JobFactory(at=at, payload={"nested": {"a": [1]}})
    job = factory(status=Status.DLQ, attempts=3, cron="0 * * * *", template_id="t")
    assert (job.scheduled_at, job.created_at) == (at, at)
    assert (job.status, job.attempts, job.cron, job.template_id) == (
        Status.DLQ,
        3,
        "0 * * * *",
        "t",
    )
    job.payload["nested"]["a"].append(2)
    assert factory().payload == {"nested": {"a": [1]}}
    later = datetime(2027, 1, 1, tzinfo=UTC)
    assert factory(scheduled_at=later, payload={"x": 1}).scheduled_at == later
