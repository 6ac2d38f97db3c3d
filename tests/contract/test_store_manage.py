"""The JobStore contract, management part: user-action transitions, bulk changes, stats, and
the cancel-vs-complete race. One suite, run against every adapter."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import trio

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import Job, Replay, Status
from jobscheduler.store import JobStore

from .store_support import NOW, dead, make_job, running_job

LATER = NOW + timedelta(minutes=1)


async def cancel_requested(store: JobStore, *, at: datetime) -> tuple[Job, Job]:
    """A running job, and the job as stored once its cancel was requested ``at``."""
    running = await running_job(store)
    requested = await store.apply(states.request_cancel(running, now=at))
    assert requested is not None
    return running, requested


# ----------------------------------------------------------------------- transitions


@pytest.mark.parametrize("status", [Status.PENDING, Status.QUEUED])
async def test_cancel_of_a_job_not_yet_running_is_final_and_its_wake_up_loses(
    store: JobStore, status: Status
) -> None:
    job = await store.insert(make_job())
    if status is Status.QUEUED:
        [job] = await store.claim_due(NOW, 1)
    cancelled = await store.apply(states.cancel(job, now=LATER))
    assert cancelled is not None
    assert (cancelled.status, cancelled.updated_at) == (Status.CANCELLED, LATER)
    # A stale wake-up for it: the pick loses, so no executor runs it.
    assert await store.apply(states.pick(job.id, worker="w", token="t", now=LATER)) is None
    assert await store.claim_due(LATER, 10) == []


async def test_cancel_of_a_claimed_job_makes_its_start_lose(store: JobStore) -> None:
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    claimed = await store.apply(states.pick(job.id, worker="w", token="t", now=NOW))
    assert claimed is not None
    assert await store.apply(states.cancel(claimed, now=NOW)) is not None
    assert await store.apply(states.start(job.id, token="t", now=NOW)) is None
    assert (await store.get(job.id)).status is Status.CANCELLED


async def test_cancel_does_not_apply_to_running_or_finished_jobs(store: JobStore) -> None:
    running = await running_job(store)
    assert await store.apply(states.cancel(running, now=NOW)) is None
    done = await store.apply(states.complete(running, token="tok-1", now=NOW))
    assert done is not None
    assert await store.apply(states.cancel(done, now=NOW)) is None
    assert (await store.get(running.id)).status is Status.COMPLETED


async def test_a_cancel_request_rides_on_the_next_heartbeat_and_blocks_a_retry(
    store: JobStore,
) -> None:
    running, requested = await cancel_requested(store, at=LATER)
    assert (requested.status, requested.cancel_requested_at) == (Status.RUNNING, LATER)
    beat = await store.apply(states.heartbeat(running.id, token="tok-1", now=LATER))
    assert beat is not None
    assert beat.cancel_requested_at == LATER  # the executor learns it with no extra read
    # The attempt failing now does not schedule a retry: the executor finishes the cancel.
    assert await store.apply(states.fail(running, token="tok-1", now=LATER, error="x")) is None
    assert await store.apply(states.release(running, token="tok-1", now=LATER)) is None
    assert await store.apply(states.finish_cancel(running, token="stale", now=LATER)) is None
    cancelled = await store.apply(states.finish_cancel(running, token="tok-1", now=LATER))
    assert cancelled is not None
    assert (cancelled.status, cancelled.claim_token) == (Status.CANCELLED, None)
    assert cancelled.attempts == 1  # the attempt started, and start counted it
    # Only the transition that applied left a record: the attempt ended cancelled.
    [record] = await store.attempts(running.id)
    assert (record.number, record.outcome, record.worker) == (1, Outcome.CANCELLED, "w1")


async def test_a_lost_job_whose_cancel_was_requested_is_recovered_as_cancelled(
    store: JobStore,
) -> None:
    running, requested = await cancel_requested(store, at=NOW)
    recovered = await store.apply(states.recover(requested, now=LATER))
    assert recovered is not None
    assert (recovered.status, recovered.attempts) == (Status.CANCELLED, 1)
    assert [(a.number, a.outcome) for a in await store.attempts(running.id)] == [(1, Outcome.LOST)]


async def test_cancel_racing_completion_never_yields_two_final_statuses(
    store: JobStore,
) -> None:
    """Many jobs, each with a completion and a cancel (request + finish) sent at once: each
    ends in exactly one final status, and the loser of every race applied nothing."""
    jobs = [await running_job(store, token=f"tok-{i}") for i in range(12)]
    outcomes: dict[str, list[str]] = {job.id: [] for job in jobs}

    async def complete(job: Job) -> None:
        token = job.claim_token
        assert token is not None
        if await store.apply(states.complete(job, token=token, now=LATER)) is not None:
            outcomes[job.id].append("completed")

    async def cancel(job: Job) -> None:
        token = job.claim_token
        assert token is not None
        if await store.apply(states.request_cancel(job, now=LATER)) is None:
            return
        if await store.apply(states.finish_cancel(job, token=token, now=LATER)) is not None:
            outcomes[job.id].append("cancelled")

    async with trio.open_nursery() as nursery:
        for job in jobs:
            nursery.start_soon(cancel, job)
            nursery.start_soon(complete, job)
    for job in jobs:
        stored = await store.get(job.id)
        assert len(outcomes[job.id]) == 1, outcomes[job.id]
        assert stored.status.value == outcomes[job.id][0]


async def test_retry_of_a_dead_job_resets_attempts_and_keeps_a_replay_record(
    store: JobStore,
) -> None:
    job = await dead(store)
    retried = await store.apply(
        states.retry(job, now=LATER, scheduled_at=LATER, payload={"fixed": True})
    )
    assert retried is not None
    assert (retried.status, retried.attempts, retried.last_error) == (Status.PENDING, 0, None)
    assert retried.payload == {"fixed": True}
    assert retried.scheduled_at == LATER
    assert retried.replays == (
        Replay(
            at=LATER,
            previous_status=Status.DLQ,
            previous_error="boom",
            previous_attempts=1,
            run=1,
        ),
    )
    assert retried.run == 1
    assert await store.get(job.id) == retried
    # The same retry again (from the version it read) loses: one replay per read.
    assert await store.apply(states.retry(job, now=LATER)) is None
    [claimed] = await store.claim_due(LATER, 10)
    assert claimed.id == job.id
    # The replayed job's next start is its attempt 1 again.
    assert await store.apply(states.pick(job.id, worker="w2", token="tok-2", now=LATER))
    started = await store.apply(states.start(job.id, token="tok-2", now=LATER))
    assert started is not None
    assert started.attempts == 1
    # It fails again like the first run's attempt 1: both records are kept, one per run.
    assert await store.apply(states.fail(started, token="tok-2", now=LATER, error="again"))
    records = await store.attempts(job.id)
    assert [(r.run, r.number, r.outcome, r.error_message) for r in records] == [
        (0, 1, Outcome.FAILED, "boom"),
        (1, 1, Outcome.FAILED, "again"),
    ]


async def test_template_pause_resume_retire_and_update(store: JobStore) -> None:
    template = await store.insert(make_job(cron="*/5 * * * *", scheduled_at=NOW))
    paused = await store.apply(states.pause(template, now=NOW))
    assert paused is not None
    assert paused.status is Status.PAUSED
    assert await store.due_templates(LATER, 10) == []
    assert await store.apply(states.pause(paused, now=NOW)) is None
    resumed = await store.apply(states.resume(paused, next_at=LATER, now=NOW))
    assert resumed is not None
    assert (resumed.status, resumed.scheduled_at) == (Status.PENDING, LATER)
    updated = await store.apply(
        states.update_template(resumed, fields={"cron": "0 * * * *", "priority": 7}, now=LATER)
    )
    assert updated is not None
    assert (updated.cron, updated.priority) == ("0 * * * *", 7)
    # Conditional on the version read: the stale one loses.
    assert (
        await store.apply(states.update_template(resumed, fields={"priority": 1}, now=LATER))
        is None
    )
    retired = await store.apply(states.retire(updated, now=LATER))
    assert retired is not None
    assert retired.status is Status.CANCELLED
    assert await store.due_templates(LATER + timedelta(days=1), 10) == []


# ----------------------------------------------------------------------- bulk and stats


async def test_apply_bulk_counts_only_the_changes_that_applied(store: JobStore) -> None:
    jobs = [await dead(store, key=f"d{i}") for i in range(3)]
    stale = jobs[0]
    first = await store.apply(states.retry(stale, now=NOW))
    assert first is not None
    changes = [states.retry(job, now=LATER) for job in jobs]
    assert await store.apply_bulk(changes) == 2  # the first job's version moved on
    assert await store.apply_bulk(changes) == 0  # safe to repeat
    assert await store.apply_bulk([]) == 0
    for job in jobs:
        assert (await store.get(job.id)).status is Status.PENDING


async def test_apply_bulk_adds_increments_and_writes_records_of_the_changes_that_applied(
    store: JobStore,
) -> None:
    jobs = [await running_job(store, key=f"r{i}", token=f"tok-{i}") for i in range(2)]
    for job in jobs:
        assert await store.apply(states.request_cancel(job, now=NOW))
    finishes = [
        states.finish_cancel(job, token=f"tok-{i}", now=LATER) for i, job in enumerate(jobs)
    ]
    stale = states.finish_cancel(jobs[0], token="stale", now=LATER)
    assert await store.apply_bulk([*finishes, stale]) == 2
    for job in jobs:
        assert (await store.get(job.id)).status is Status.CANCELLED
        assert [(a.number, a.outcome) for a in await store.attempts(job.id)] == [
            (1, Outcome.CANCELLED)
        ]
    # An increment in a bulk change is added, like apply's.
    pending = await store.insert(make_job(key="inc"))
    bump = states.Change(
        transition="test",
        job_id=pending.id,
        expect={"status": Status.PENDING},
        set={"updated_at": LATER},
        inc={"attempts": 2},
    )
    assert await store.apply_bulk([bump]) == 1
    assert (await store.get(pending.id)).attempts == pending.attempts + 2


async def test_stats_counts_lag_and_finished_windows(store: JobStore) -> None:
    done = await running_job(store, key="done", scheduled_at=NOW - timedelta(hours=3))
    assert await store.apply(states.complete(done, token="tok-1", now=NOW - timedelta(minutes=3)))
    await dead(store, key="dead", scheduled_at=NOW - timedelta(hours=3))  # dead at NOW
    await store.insert(make_job(scheduled_at=NOW - timedelta(seconds=30)))
    await store.insert(make_job(job_type="email", scheduled_at=NOW + timedelta(hours=1)))
    await store.insert(make_job(cron="* * * * *", scheduled_at=NOW - timedelta(hours=2)))
    await store.insert(make_job(tenant="t2", scheduled_at=NOW - timedelta(hours=1)))

    stats = await store.stats("tenant-a", NOW)
    assert stats.counts == {
        (Status.PENDING, "noop"): 2,
        (Status.PENDING, "email"): 1,
        (Status.COMPLETED, "noop"): 1,
        (Status.DLQ, "noop"): 1,
    }
    # Templates do not count as waiting work; other tenants are not seen.
    assert stats.oldest_due_at == NOW - timedelta(seconds=30)
    assert stats.queue_lag(NOW) == 30.0
    assert [(w.minutes, w.completed, w.failed) for w in stats.windows] == [
        (1, 0, 1),
        (5, 1, 1),
        (15, 1, 1),
    ]
    everyone = await store.stats(None, NOW)
    assert everyone.oldest_due_at == NOW - timedelta(hours=1)
    assert sum(everyone.counts.values()) == 6
