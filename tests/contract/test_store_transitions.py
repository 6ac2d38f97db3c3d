"""The JobStore contract, conditional transitions: pick, start, complete, fail, release,
heartbeat, requeue, recovery and the cron template changes each apply only when the job is
still where the change expects it (status, claim token, old fire time), so a stale claim
token, a lost race or a second reaper's repeat is refused; ``apply_many`` tries every change
on its own. Run against every adapter (the ``store`` fixture in ``conftest.py``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import Status, new_job_id
from jobscheduler.errors import DuplicateJob
from jobscheduler.store import JobStore

from .store_support import NOW, make_job, running_job


async def test_pick_start_complete_happy_path_with_token(store: JobStore) -> None:
    running = await running_job(store)
    assert running.status is Status.RUNNING
    assert running.claimed_by == "w1"
    assert running.claimed_at == NOW
    done = await store.apply(states.complete(running, token="tok-1", now=NOW))
    assert done is not None
    assert done.status is Status.COMPLETED
    assert (await store.get(running.id)).status is Status.COMPLETED


async def test_pick_of_a_job_not_queued_loses(store: JobStore) -> None:
    job = await store.insert(make_job())
    assert await store.apply(states.pick(job.id, worker="w", token="t", now=NOW)) is None
    assert await store.apply(states.pick(new_job_id(), worker="w", token="t", now=NOW)) is None


async def test_only_one_of_two_concurrent_picks_wins(store: JobStore) -> None:
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    results = await store.apply_many(
        [
            states.pick(job.id, worker="a", token="ta", now=NOW),
            states.pick(job.id, worker="b", token="tb", now=NOW),
        ]
    )
    assert sum(r is not None for r in results) == 1


async def test_apply_many_of_a_pick_and_its_start_returns_both_states(store: JobStore) -> None:
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    later = NOW + timedelta(seconds=1)
    picked, running = await store.apply_many(
        [
            states.pick(job.id, worker="w", token="t", now=NOW),
            states.start(job.id, token="t", now=later),
        ]
    )
    assert picked is not None
    assert running is not None
    assert (picked.status, picked.heartbeat_at, picked.updated_at) == (Status.CLAIMED, NOW, NOW)
    assert (running.status, running.heartbeat_at, running.updated_at) == (
        Status.RUNNING,
        later,
        later,
    )
    for state in (picked, running):
        assert (state.claimed_by, state.claim_token, state.claimed_at) == ("w", "t", NOW)
    # attempts counts attempts started: the start (not the pick) counts it.
    assert (picked.attempts, running.attempts) == (0, 1)
    assert await store.get(job.id) == running


async def test_apply_many_tries_a_change_even_when_the_one_before_it_lost(
    store: JobStore,
) -> None:
    # The start loses (the job is already running); the heartbeat after it, whose
    # expectations the start would have written, still applies on its own.
    running = await running_job(store, token="t")
    started, beat = await store.apply_many(
        [
            states.start(running.id, token="t", now=NOW + timedelta(seconds=1)),
            states.heartbeat(running.id, token="t", now=NOW + timedelta(seconds=2)),
        ]
    )
    assert started is None
    assert beat is not None
    assert beat.heartbeat_at == NOW + timedelta(seconds=2)


async def test_stale_claim_token_cannot_complete_fail_or_heartbeat(store: JobStore) -> None:
    running = await running_job(store, token="old")
    # The reaper recovers it, an executor picks it again with a new token.
    recovered = await store.apply(states.recover(running, now=NOW + timedelta(minutes=10)))
    assert recovered is not None
    assert recovered.status is Status.PENDING
    assert recovered.attempts == 1  # the attempt it started, failed as lost
    later = recovered.scheduled_at
    [requeued] = await store.claim_due(later, 10)
    newer = await store.apply(states.pick(requeued.id, worker="w2", token="new", now=later))
    assert newer is not None
    assert await store.apply(states.complete(running, token="old", now=later)) is None
    assert await store.apply(states.fail(running, token="old", now=later, error="x")) is None
    assert await store.apply(states.heartbeat(running.id, token="old", now=later)) is None
    current = await store.get(running.id)
    assert current.status is Status.CLAIMED
    assert current.claimed_by == "w2"
    assert current.attempts == 1
    # Only the applied recovery left a record; the stale outcomes wrote none.
    assert [(a.number, a.outcome) for a in await store.attempts(running.id)] == [(1, Outcome.LOST)]


async def test_fail_retries_with_backoff_then_dead_letters(store: JobStore) -> None:
    running = await running_job(store, max_attempts=2)
    assert running.attempts == 1
    failed = await store.apply(states.fail(running, token="tok-1", now=NOW, error="boom"))
    assert failed is not None
    assert failed.status is Status.PENDING
    assert failed.attempts == 1
    assert failed.last_error == "boom"
    assert failed.scheduled_at == NOW + timedelta(seconds=2)
    assert await store.claim_due(NOW + timedelta(seconds=1), 10) == []
    [again] = await store.claim_due(NOW + timedelta(seconds=2), 10)
    picked = await store.apply(states.pick(again.id, worker="w", token="t2", now=NOW))
    assert picked is not None
    started = await store.apply(states.start(picked.id, token="t2", now=NOW))
    assert started is not None
    dead = await store.apply(states.fail(started, token="t2", now=NOW, error="boom again"))
    assert dead is not None
    assert dead.status is Status.DLQ
    assert dead.attempts == 2
    assert await store.claim_due(NOW + timedelta(days=1), 10) == []


async def test_release_hands_back_without_counting_an_attempt(store: JobStore) -> None:
    running = await running_job(store)
    released = await store.apply(states.release(running, token="tok-1", now=NOW))
    assert released is not None
    assert released.status is Status.PENDING
    assert released.attempts == 0
    assert [j.id for j in await store.claim_due(NOW, 10)] == [running.id]
    [record] = await store.attempts(running.id)
    assert (record.number, record.outcome, record.worker) == (1, Outcome.RELEASED, "w1")


async def test_find_stale_and_requeue_queued(store: JobStore) -> None:
    job = await store.insert(make_job())
    await store.claim_due(NOW, 10)
    assert await store.find_stale([Status.QUEUED], "queued_at", NOW, 10) == []
    [stale] = await store.find_stale([Status.QUEUED], "queued_at", NOW + timedelta(seconds=1), 10)
    assert stale.id == job.id
    requeued = await store.apply(states.requeue(stale, now=NOW + timedelta(seconds=31)))
    assert requeued is not None
    assert requeued.status is Status.PENDING
    assert requeued.attempts == 0
    # A second reaper acting on the same observation loses.
    assert await store.apply(states.requeue(stale, now=NOW + timedelta(seconds=31))) is None


async def test_find_stale_lists_the_oldest_first_up_to_the_limit(store: JobStore) -> None:
    for seconds in (20, 0, 10):
        await store.insert(make_job(scheduled_at=NOW - timedelta(hours=1)))
        await store.claim_due(NOW + timedelta(seconds=seconds), 1)
    later = NOW + timedelta(minutes=5)
    oldest = await store.find_stale([Status.QUEUED], "queued_at", later, 2)
    assert [job.queued_at for job in oldest] == [NOW, NOW + timedelta(seconds=10)]
    everything = await store.find_stale([Status.QUEUED], "queued_at", later, 10)
    assert [job.queued_at for job in everything] == [
        NOW + timedelta(seconds=s) for s in (0, 10, 20)
    ]
    assert await store.find_stale([Status.CLAIMED], "queued_at", later, 10) == []


async def test_heartbeat_keeps_a_running_job_out_of_the_stale_set(store: JobStore) -> None:
    running = await running_job(store)
    later = NOW + timedelta(minutes=4)
    beat = await store.apply(states.heartbeat(running.id, token="tok-1", now=later))
    assert beat is not None
    assert beat.heartbeat_at == later
    cutoff = NOW + timedelta(minutes=1)
    assert (
        await store.find_stale([Status.CLAIMED, Status.RUNNING], "heartbeat_at", cutoff, 10) == []
    )
    # A reaper that observed the old heartbeat cannot recover the job any more.
    assert await store.apply(states.recover(running, now=later)) is None


async def test_template_advance_is_conditional_on_the_old_fire_time(store: JobStore) -> None:
    template = await store.insert(make_job(cron="* * * * *", scheduled_at=NOW))
    nxt = NOW + timedelta(minutes=1)
    moved = await store.apply(states.advance_template(template, next_at=nxt, now=NOW))
    assert moved is not None
    assert moved.scheduled_at == nxt
    assert moved.status is Status.PENDING
    assert await store.apply(states.advance_template(template, next_at=nxt, now=NOW)) is None


async def test_spawned_instance_key_is_idempotent_per_fire_time(store: JobStore) -> None:
    template = await store.insert(make_job(cron="* * * * *", scheduled_at=NOW, key="nightly"))
    first = states.spawn_instance(template, fire_at=NOW, now=NOW)
    assert first.idempotency_key == f"nightly-run-{int(NOW.timestamp()) * 1_000_000_000}"
    await store.insert(first)
    with pytest.raises(DuplicateJob):
        await store.insert(states.spawn_instance(template, fire_at=NOW, now=NOW))


async def test_dead_letter_template(store: JobStore) -> None:
    template = await store.insert(make_job(cron="* * * * *", scheduled_at=NOW))
    dead = await store.apply(states.dead_letter_template(template, error="bad cron", now=NOW))
    assert dead is not None
    assert dead.status is Status.DLQ
    assert dead.last_error == "bad cron"
    assert await store.due_templates(NOW, 10) == []
