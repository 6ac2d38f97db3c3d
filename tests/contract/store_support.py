"""Job builders shared by the JobStore contract suites (``tests/contract/test_store_*.py``
and their siblings) and by the Mongo integration tests: a fixed ``NOW``, ``make_job`` and
``running_job``, which walks a fresh job through claim, pick and start."""

from __future__ import annotations

from datetime import UTC, datetime

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, new_job_id, utc
from jobscheduler.store import JobStore

NOW = datetime(2026, 9, 29, 18, 0, 0, tzinfo=UTC)


def make_job(
    *,
    key: str | None = None,
    tenant: str = "tenant-a",
    job_type: str = "noop",
    priority: int = 0,
    scheduled_at: datetime = NOW,
    created_at: datetime = NOW,
    cron: str | None = None,
    max_attempts: int = 3,
    payload: dict[str, object] | None = None,
    template_id: str | None = None,
) -> Job:
    job_id = new_job_id()
    return Job(
        id=job_id,
        idempotency_key=key or f"key-{job_id}",
        tenant_id=tenant,
        job_type=job_type,
        payload=payload if payload is not None else {"n": 1, "nested": {"a": [1, 2]}},
        priority=priority,
        scheduled_at=utc(scheduled_at),
        cron=cron,
        max_attempts=max_attempts,
        created_at=utc(created_at),
        updated_at=utc(created_at),
        template_id=template_id,
    )


async def running_job(store: JobStore, *, token: str = "tok-1", **kwargs: object) -> Job:
    job = await store.insert(make_job(**kwargs))  # type: ignore[arg-type]
    [queued] = await store.claim_due(NOW, 10)
    assert queued.id == job.id
    claimed = await store.apply(states.pick(job.id, worker="w1", token=token, now=NOW))
    assert claimed is not None
    running = await store.apply(states.start(claimed.id, token=token, now=NOW))
    assert running is not None
    return running
