"""The JobStore contract, pruning: the expired jobs of one (tenant, status, job type),
oldest first, never a template, a workflow's step nor a job still running; a delete that
spares a job changed since it was read, and takes the attempt records along; the retention
overrides. Run against every adapter."""

from __future__ import annotations

from datetime import timedelta

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.domain.retention import Override, PruneSummary, Scope
from jobscheduler.domain.steps import Step
from jobscheduler.store import JobStore
from jobscheduler.store.query import JobQuery

from .store_support import NOW, make_job, running_job

DAY = timedelta(days=1)
KEY = ("tenant-a", Status.COMPLETED, "noop")


async def test_expired_jobs_are_one_keys_finished_before_the_cutoff_oldest_first(
    store: JobStore,
) -> None:
    oldest = make_job(status=Status.COMPLETED, created_at=NOW - 10 * DAY)
    older = make_job(status=Status.COMPLETED, created_at=NOW - 9 * DAY)
    await store.insert_many(
        [
            older,
            oldest,
            make_job(status=Status.COMPLETED, created_at=NOW - DAY),  # not expired
            make_job(status=Status.COMPLETED, created_at=NOW - 9 * DAY, tenant="other"),
            make_job(status=Status.COMPLETED, created_at=NOW - 9 * DAY, job_type="email"),
            make_job(status=Status.DLQ, created_at=NOW - 9 * DAY),
            make_job(created_at=NOW - 9 * DAY),  # pending
            make_job(status=Status.COMPLETED, created_at=NOW - 9 * DAY, cron="* * * * *"),
            attrs.evolve(  # a workflow's step: kept with its workflow
                make_job(status=Status.COMPLETED, created_at=NOW - 9 * DAY),
                workflow_id="65a0000000000000000000ff",
                step=Step(name="export"),
            ),
        ]
    )
    expired = await store.expired_jobs(KEY, NOW - 7 * DAY, 10)
    assert [job.id for job in expired] == [oldest.id, older.id]
    assert [job.id for job in await store.expired_jobs(KEY, NOW - 7 * DAY, 1)] == [oldest.id]


async def test_a_job_retried_after_it_was_read_is_not_deleted(store: JobStore) -> None:
    dead = await store.insert(make_job(status=Status.DLQ, created_at=NOW - 40 * DAY))
    kept = await store.insert(make_job(status=Status.DLQ, created_at=NOW - 40 * DAY))
    expired = await store.expired_jobs(("tenant-a", Status.DLQ, "noop"), NOW - 30 * DAY, 10)
    assert len(expired) == 2
    await store.apply(states.retry(kept, now=NOW))
    assert await store.delete_jobs(expired) == 1
    assert (await store.get(kept.id)).status is Status.PENDING
    assert await store.find_jobs(JobQuery(tenant_id=None, ids=(dead.id,)), 10) == []


async def test_a_deleted_job_takes_its_attempt_records_along(store: JobStore) -> None:
    running = await running_job(store)
    done = await store.apply(states.complete(running, token="tok-1", now=NOW))
    assert done is not None
    assert len(await store.attempts(done.id)) == 1
    [expired] = await store.expired_jobs(KEY, NOW + DAY, 10)
    assert await store.delete_jobs([expired]) == 1
    assert await store.attempts(done.id) == []


async def test_retention_overrides_are_stored_replaced_and_deleted(store: JobStore) -> None:
    tenant = Override(
        scope=Scope.TENANT, name="acme", keep={Status.COMPLETED: 3600.0}, updated_at=NOW
    )
    job_type = Override(
        scope=Scope.JOB_TYPE, name="email", keep={Status.DLQ: 90 * 86400.0}, updated_at=NOW
    )
    await store.set_retention(tenant)
    await store.set_retention(job_type)
    assert await store.retention_overrides() == [job_type, tenant]
    longer = attrs.evolve(tenant, keep={Status.COMPLETED: 7200.0, Status.CANCELLED: 60.0})
    await store.set_retention(longer)
    assert await store.retention_overrides() == [job_type, longer]
    await store.set_retention(attrs.evolve(job_type, keep={}))
    assert await store.retention_overrides() == [longer]


async def test_the_last_prune_sweep_is_kept_in_place_of_the_one_before(store: JobStore) -> None:
    assert await store.last_prune() is None
    first = PruneSummary(at=NOW, took=1.5, pruned={Status.COMPLETED: 3}, archived=3)
    second = PruneSummary(at=NOW + DAY, took=0.25, pruned={Status.DLQ: 1, Status.COMPLETED: 2})
    await store.record_prune(first)
    assert await store.last_prune() == first
    await store.record_prune(second)
    assert await store.last_prune() == second


async def test_finished_before_selects_jobs_that_finished_before_then(store: JobStore) -> None:
    old = await store.insert(make_job(status=Status.COMPLETED, created_at=NOW - 9 * DAY))
    await store.insert(make_job(status=Status.COMPLETED, created_at=NOW - DAY))
    await store.insert(make_job(created_at=NOW - 9 * DAY))  # unfinished: never matches
    query = JobQuery(tenant_id="tenant-a", finished_before=NOW - 7 * DAY)
    assert [job.id for job in await store.find_jobs(query, 10)] == [old.id]


async def test_prune_expired_deletes_the_oldest_expired_with_their_attempt_records(
    store: JobStore,
) -> None:
    running = await running_job(store)
    done = await store.apply(states.complete(running, token="tok-1", now=NOW - 10 * DAY))
    assert done is not None
    newer = await store.insert(make_job(status=Status.COMPLETED, created_at=NOW - 9 * DAY))
    young = await store.insert(make_job(status=Status.COMPLETED, created_at=NOW - DAY))
    assert await store.prune_expired(KEY, NOW - 7 * DAY, 1) == 1
    assert await store.attempts(done.id) == []
    assert await store.prune_expired(KEY, NOW - 7 * DAY, 10) == 1
    left = await store.find_jobs(JobQuery(tenant_id=None), 10)
    assert [job.id for job in left] == [young.id]
    assert newer.id not in {job.id for job in left}
    assert await store.reconcile_counts() == {}


async def test_a_delete_of_many_jobs_takes_every_one_still_as_read(store: JobStore) -> None:
    # More than one slice of any adapter's, with a changed job far in, so that a later
    # slice meets it.
    jobs = [make_job(status=Status.DLQ, created_at=NOW - 40 * DAY) for _ in range(130)]
    await store.insert_many(jobs)
    expired = await store.expired_jobs(("tenant-a", Status.DLQ, "noop"), NOW - 30 * DAY, 200)
    assert len(expired) == 130
    kept = await store.apply(states.retry(expired[120], now=NOW))
    assert kept is not None
    assert await store.delete_jobs(expired) == 129
    left = await store.find_jobs(JobQuery(tenant_id=None), 200)
    assert [job.id for job in left] == [kept.id]
    assert await store.reconcile_counts() == {}


async def test_a_prune_of_many_jobs_stops_at_its_limit_oldest_first(store: JobStore) -> None:
    jobs = [
        make_job(status=Status.COMPLETED, created_at=NOW - 40 * DAY + i * timedelta(seconds=1))
        for i in range(130)
    ]
    await store.insert_many(jobs)
    assert await store.prune_expired(KEY, NOW - 30 * DAY, 120) == 120
    left = await store.find_jobs(JobQuery(tenant_id=None), 200)
    assert sorted(job.id for job in left) == sorted(job.id for job in jobs[120:])
    assert await store.prune_expired(KEY, NOW - 30 * DAY, 120) == 10
    assert await store.prune_expired(KEY, NOW - 30 * DAY, 120) == 0
    assert await store.reconcile_counts() == {}
