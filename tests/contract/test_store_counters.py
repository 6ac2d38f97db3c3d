"""The JobStore contract, counters: after every kind of write (insert, claim, pick and
start, complete, fail, retry, cancel, release, recover, bulk changes, prune) the counters
equal a recount of the jobs, and the counts, stats and Overview are answered from them. Run
against every adapter."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.store import JobStore
from jobscheduler.store.query import CountKey, JobQuery

from .store_support import NOW, make_job, running_job


async def recount(store: JobStore) -> dict[CountKey, int]:
    """Every job counted by listing them all (not through the counters)."""
    jobs = await store.find_jobs(JobQuery(tenant_id=None), 5000)
    return dict(Counter((job.tenant_id, job.status, job.job_type) for job in jobs))


async def assert_counted(store: JobStore) -> None:
    assert await store.job_counters() == await recount(store)
    assert await store.reconcile_counts() == {}


async def test_inserts_are_counted_and_duplicates_are_not(store: JobStore) -> None:
    first = await store.insert(make_job(key="k", tenant="t1", job_type="email"))
    await store.insert_many(
        [
            make_job(key="k", tenant="t1", job_type="email"),  # a duplicate of first
            make_job(tenant="t1", job_type="email"),
            make_job(tenant="t2", job_type="sms", status=Status.COMPLETED),
        ]
    )
    assert first.status is Status.PENDING
    assert (await store.job_counters())[("t1", Status.PENDING, "email")] == 2
    await assert_counted(store)


async def test_a_claim_pick_start_and_complete_move_the_counters(store: JobStore) -> None:
    await store.insert_many([make_job() for _ in range(3)])
    queued, _ = await store.claim_due(NOW, 2)
    await assert_counted(store)
    await store.apply(states.pick(queued.id, worker="w", token="tok-1", now=NOW))
    await assert_counted(store)
    running = await store.apply(states.start(queued.id, token="tok-1", now=NOW))
    assert running is not None
    await assert_counted(store)
    await store.apply(states.complete(running, token="tok-1", now=NOW))
    counters = await store.job_counters()
    assert counters[("tenant-a", Status.COMPLETED, "noop")] == 1
    await assert_counted(store)


async def test_a_pick_and_start_in_one_batch_are_counted_once_each(store: JobStore) -> None:
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    await store.apply_many(
        [
            states.pick(job.id, worker="w", token="t", now=NOW),
            states.start(job.id, token="t", now=NOW),
        ]
    )
    assert (await store.job_counters())[("tenant-a", Status.RUNNING, "noop")] == 1
    await assert_counted(store)


async def test_failures_retries_and_dead_letters_are_counted(store: JobStore) -> None:
    once = await running_job(store, max_attempts=3)
    await store.apply(states.fail(once, token="tok-1", now=NOW, error="boom"))
    last = await running_job(store, token="tok-2", max_attempts=1)
    dead = await store.apply(states.fail(last, token="tok-2", now=NOW, error="boom"))
    assert dead is not None
    assert dead.status is Status.DLQ
    await assert_counted(store)
    await store.apply(states.retry(dead, now=NOW))
    await assert_counted(store)


async def test_cancels_of_several_statuses_are_counted_alone_and_in_bulk(store: JobStore) -> None:
    jobs = [await store.insert(make_job()) for _ in range(5)]
    await store.claim_due(NOW, 2)  # two queued, three pending
    await store.apply(states.cancel(jobs[0], now=NOW))
    await assert_counted(store)
    applied = await store.apply_bulk([states.cancel(job, now=NOW) for job in jobs[1:]])
    assert applied == 4
    assert (await store.job_counters())[("tenant-a", Status.CANCELLED, "noop")] == 5
    await assert_counted(store)


async def test_a_release_and_a_recovery_are_counted(store: JobStore) -> None:
    running = await running_job(store)
    await store.apply_many([states.release(running, token="tok-1", now=NOW)])
    await assert_counted(store)
    [queued] = await store.claim_due(NOW + timedelta(seconds=1), 1)
    await store.apply(states.pick(queued.id, worker="w", token="tok-2", now=NOW))
    again = await store.apply(states.start(queued.id, token="tok-2", now=NOW))
    assert again is not None
    await store.apply(states.recover(again, now=NOW + timedelta(minutes=5)))
    await assert_counted(store)


async def test_the_counts_stats_and_overview_read_the_counters(store: JobStore) -> None:
    await store.insert_many(
        [make_job(tenant="t1", job_type="a"), make_job(tenant="t2", job_type="b")]
    )
    await store.insert(make_job(tenant="t1", job_type="a", status=Status.DLQ))
    counts = await store.count_jobs("t1", by_type=True)
    assert counts.by_type == {(Status.PENDING, "a"): 1, (Status.DLQ, "a"): 1}
    assert (await store.count_jobs(None)).by_status[Status.PENDING] == 2
    assert await store.count_unfinished("t2") == 1
    stats = await store.stats("t1", NOW)
    assert stats.counts == {(Status.PENDING, "a"): 1, (Status.DLQ, "a"): 1}
    overview = await store.overview_stats(None, NOW)
    assert overview.counts[Status.PENDING] == 2
    assert overview.counts[Status.DLQ] == 1


async def test_pruned_jobs_leave_the_counters(store: JobStore) -> None:
    old = [
        await store.insert(make_job(status=Status.COMPLETED, created_at=NOW - timedelta(days=9)))
        for _ in range(3)
    ]
    await store.insert(make_job(status=Status.COMPLETED))
    key = ("tenant-a", Status.COMPLETED, "noop")
    expired = await store.expired_jobs(key, NOW - timedelta(days=7), 10)
    assert {job.id for job in expired} == {job.id for job in old}
    assert await store.delete_jobs(expired) == 3
    assert (await store.job_counters())[key] == 1
    await assert_counted(store)
