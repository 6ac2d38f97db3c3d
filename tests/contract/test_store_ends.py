"""The JobStore contract for the counters of ended jobs: the throughput figures (``GET
/stats``'s windows, the Overview's series) count each end where it happened, whatever
happens to the job afterwards, in steps of ten seconds; the reaper forgets old steps.
Run against every adapter."""

from __future__ import annotations

from datetime import timedelta

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.store import JobStore
from jobscheduler.store.ends import KEPT
from jobscheduler.store.query import Window

from .store_support import NOW, dead, make_job, running_job


def ended_at(status: Status, seconds_ago: float, *, tenant: str = "tenant-a") -> Job:
    """A job stored already ended, ``seconds_ago`` before NOW (a whole minute)."""
    at = NOW - timedelta(seconds=seconds_ago)
    job = make_job(tenant=tenant, created_at=at - timedelta(hours=1))
    return attrs.evolve(job, status=status, attempts=1, updated_at=utc(at), finished_at=utc(at))


def figures(windows: tuple[Window, ...]) -> list[tuple[int, int, int]]:
    return [(w.minutes, w.completed, w.failed) for w in windows]


async def test_an_end_stays_counted_when_its_job_is_retried_or_deleted(store: JobStore) -> None:
    failed = await dead(store, key="dead")  # dead at NOW
    done = await running_job(store, key="done")
    completed = await store.apply(states.complete(done, token="tok-1", now=NOW))
    assert completed is not None
    later = NOW + timedelta(seconds=20)
    assert figures((await store.stats("tenant-a", later)).windows) == [
        (1, 1, 1),
        (5, 1, 1),
        (15, 1, 1),
    ]

    # The dead job is replayed and the completed one deleted: both ended, and stay counted.
    assert await store.apply(states.retry(failed, now=later, scheduled_at=later)) is not None
    assert await store.delete_jobs([completed]) == 1
    stats = await store.stats("tenant-a", later)
    assert stats.counts == {(Status.PENDING, "noop"): 1}
    assert figures(stats.windows) == [(1, 1, 1), (5, 1, 1), (15, 1, 1)]
    overview = await store.overview_stats(None, later)
    assert (sum(overview.completed), sum(overview.failed)) == (1, 1)


async def test_a_second_end_of_one_job_counts_again(store: JobStore) -> None:
    failed = await dead(store)
    again = await store.apply(states.retry(failed, now=NOW, scheduled_at=NOW))
    assert again is not None
    [queued] = await store.claim_due(NOW + timedelta(seconds=1), 10)
    picked = await store.apply(states.pick(queued.id, worker="w1", token="tok-2", now=NOW))
    assert picked is not None
    running = await store.apply(states.start(picked.id, token="tok-2", now=NOW))
    assert running is not None
    assert await store.apply(states.complete(running, token="tok-2", now=NOW))
    assert figures((await store.stats(None, NOW)).windows)[0] == (1, 1, 1)


async def test_a_window_holds_the_steps_that_began_within_it(store: JobStore) -> None:
    # NOW is a whole minute: the step of 60 s before it begins exactly at the 1-minute
    # window's start; the step of 61 s before it began ten seconds earlier.
    for job in [
        ended_at(Status.COMPLETED, 0),
        ended_at(Status.COMPLETED, 60),
        ended_at(Status.COMPLETED, 61),
        ended_at(Status.DLQ, 299),
        ended_at(Status.DLQ, 301),
        ended_at(Status.DLQ, 15 * 60 + 1),
        ended_at(Status.CANCELLED, 5),  # not an end the figures count
        ended_at(Status.COMPLETED, 5, tenant="tenant-b"),
    ]:
        await store.insert(job)
    assert figures((await store.stats("tenant-a", NOW)).windows) == [
        (1, 2, 0),
        (5, 3, 1),
        (15, 3, 2),
    ]
    assert figures((await store.stats(None, NOW)).windows)[0] == (1, 3, 0)


async def test_the_reaper_forgets_the_steps_past_their_use(store: JobStore) -> None:
    await store.insert(ended_at(Status.COMPLETED, 60))
    await store.insert(ended_at(Status.DLQ, 3 * 3600))
    await store.insert(ended_at(Status.DLQ, 3 * 3600, tenant="tenant-b"))
    assert await store.forget_ends(NOW - KEPT) >= 1
    assert await store.forget_ends(NOW - KEPT) == 0
    assert figures((await store.stats(None, NOW)).windows)[0] == (1, 1, 0)

    assert await store.forget_ends(NOW + timedelta(seconds=10)) >= 1
    assert figures((await store.stats(None, NOW)).windows)[2] == (15, 0, 0)
    assert sum((await store.overview_stats(None, NOW)).completed) == 0
    # The jobs are still there: only the counters of their ends went.
    assert (await store.count_jobs(None)).by_status[Status.DLQ] == 2


async def test_an_end_written_without_reading_the_job_back_is_counted(store: JobStore) -> None:
    # The executor writes its outcomes so (apply_many_lean, nothing read back).
    done = await running_job(store, key="done", token="tok-1")
    change = states.complete(done, token="tok-1", now=NOW)
    assert await store.apply_many_lean([change], [False]) == [True]
    assert figures((await store.stats(None, NOW)).windows)[0] == (1, 1, 0)


async def test_a_batch_of_ends_over_many_steps_is_counted(store: JobStore) -> None:
    # 300 jobs inserted already ended, each in a step of its own over the Overview's hour:
    # 300 counters moved by one write (MongoDB sends them in commands of a few dozen).
    jobs = [ended_at(Status.COMPLETED, 10 * i + 1) for i in range(300)]
    await store.insert_many(jobs)
    overview = await store.overview_stats("tenant-a", NOW)
    assert sum(overview.completed) == 300
    assert overview.completed[-2:] == (6, 0)  # the minute before NOW's holds six steps
