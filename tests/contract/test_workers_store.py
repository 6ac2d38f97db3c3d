"""The JobStore contract for the Overview: presence records (upsert, expiry, prune, forget)
and the Overview's figures (counts by status, oldest due job, finished per minute), run
against every adapter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.overview import SERIES_MINUTES, series_start
from jobscheduler.domain.workers import WorkerBeat, expiry
from jobscheduler.store import JobStore

from .store_support import make_job

NOW = datetime(2026, 9, 29, 18, 0, 30, tzinfo=UTC)


def beat(worker: str, *, role: str = "executor", seen: datetime = NOW, **kw: object) -> WorkerBeat:
    return WorkerBeat(
        id=f"{role}:{worker}",
        role=role,
        host="host-1",
        pid=4242,
        started_at=NOW - timedelta(minutes=5),
        seen_at=seen,
        expires_at=expiry(seen),
        **kw,  # type: ignore[arg-type]
    )


async def test_a_beat_is_listed_while_fresh_and_replaced_by_the_next_one(store: JobStore) -> None:
    first = beat("w1", job_types=("noop", "email"), in_flight=2)
    await store.beat_worker(first)
    assert await store.live_workers(NOW) == [first]
    second = beat("w1", job_types=("noop", "email"), in_flight=0, seen=NOW + timedelta(seconds=5))
    await store.beat_worker(second)
    assert await store.live_workers(NOW + timedelta(seconds=5)) == [second]


async def test_an_expired_record_is_not_listed_and_prune_deletes_only_expired_ones(
    store: JobStore,
) -> None:
    old = beat("gone", seen=NOW - timedelta(minutes=1))
    live = beat("here")
    leader = beat("s1", role="scheduler", leader=True)
    for record in (old, live, leader):
        await store.beat_worker(record)
    assert await store.live_workers(NOW) == [live, leader]  # by role, then id
    assert await store.prune_workers(NOW) == 1
    assert await store.prune_workers(NOW) == 0
    # Later than every expiry: nothing is live, although the records are still stored.
    assert await store.live_workers(NOW + timedelta(minutes=5)) == []


async def test_forget_deletes_one_record_and_an_unknown_id_is_no_error(store: JobStore) -> None:
    await store.beat_worker(beat("w1"))
    await store.beat_worker(beat("w2"))
    await store.forget_worker("executor:w1")
    await store.forget_worker("executor:nobody")
    assert [w.id for w in await store.live_workers(NOW)] == ["executor:w2"]


def finished(status: Status, at: datetime, *, tenant: str = "tenant-a") -> Job:
    return attrs.evolve(
        make_job(tenant=tenant, created_at=at - timedelta(hours=2)),
        status=status,
        attempts=1,
        updated_at=utc(at),
    )


async def test_overview_counts_every_status_of_one_tenant_or_of_all(store: JobStore) -> None:
    for job in [
        make_job(tenant="tenant-a"),
        make_job(tenant="tenant-a"),
        finished(Status.COMPLETED, NOW),
        finished(Status.DLQ, NOW, tenant="tenant-b"),
    ]:
        await store.insert(job)
    mine = await store.overview_stats("tenant-a", NOW)
    assert mine.counts == {**dict.fromkeys(Status, 0), Status.PENDING: 2, Status.COMPLETED: 1}
    every = await store.overview_stats(None, NOW)
    assert every.counts[Status.DLQ] == 1
    assert sum(every.counts.values()) == 4
    assert (await store.overview_stats("nobody", NOW)).counts == dict.fromkeys(Status, 0)


async def test_overview_buckets_the_last_hour_by_finish_minute(store: JobStore) -> None:
    start = series_start(NOW)
    jobs = [
        finished(Status.COMPLETED, NOW),  # this minute: the last bucket
        finished(Status.COMPLETED, NOW - timedelta(seconds=20)),  # 18:00:10, same minute
        finished(Status.COMPLETED, start),  # the first bucket
        finished(Status.COMPLETED, start - timedelta(milliseconds=1)),  # too old
        finished(Status.DLQ, NOW - timedelta(minutes=2)),
        finished(Status.DLQ, NOW - timedelta(minutes=2), tenant="tenant-b"),
    ]
    for job in jobs:
        await store.insert(job)
    stats = await store.overview_stats("tenant-a", NOW)
    assert stats.start == start
    assert len(stats.completed) == len(stats.failed) == SERIES_MINUTES
    assert stats.completed[-1] == 2
    assert stats.completed[0] == 1
    assert sum(stats.completed) == 3
    assert stats.failed[-3] == 1
    assert sum(stats.failed) == 1
    assert sum((await store.overview_stats(None, NOW)).failed) == 2
    # Jobs that finished, but before the hour: counted by status, not in the series.
    await store.insert(finished(Status.COMPLETED, start - timedelta(hours=1), tenant="quiet"))
    quiet = await store.overview_stats("quiet", NOW)
    assert quiet.counts[Status.COMPLETED] == 1
    assert quiet.completed == (0,) * SERIES_MINUTES


async def test_overview_oldest_due_is_the_oldest_pending_one_off_job(store: JobStore) -> None:
    await store.insert(make_job(scheduled_at=NOW - timedelta(seconds=40)))
    await store.insert(make_job(scheduled_at=NOW - timedelta(seconds=10)))
    await store.insert(make_job(scheduled_at=NOW + timedelta(minutes=1)))  # not due yet
    await store.insert(make_job(tenant="tenant-b", scheduled_at=NOW - timedelta(minutes=9)))
    stats = await store.overview_stats("tenant-a", NOW)
    assert stats.oldest_due_at == utc(NOW - timedelta(seconds=40))
    assert stats.queue_lag(NOW) == 40.0
    assert (await store.overview_stats(None, NOW)).queue_lag(NOW) == 540.0
    assert (await store.overview_stats("nobody", NOW)).oldest_due_at is None
