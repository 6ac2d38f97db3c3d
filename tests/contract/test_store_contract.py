"""The JobStore contract: ONE suite, run against every adapter.

What a store must promise for the roles to be correct under concurrency: unique
idempotency keys, atomic priority-ordered claims that never hand a job out twice, and
conditional transitions that a stale claim token can never satisfy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio

from jobscheduler import states
from jobscheduler.attempts import Attempt, Failure, Outcome
from jobscheduler.errors import DuplicateJob, JobNotFound, StoreError
from jobscheduler.model import Job, Status, new_job_id, utc
from jobscheduler.store import JobStore

from .store_fixtures import ADAPTER_PARAMS, ADAPTERS

NOW = datetime(2026, 9, 29, 18, 0, 0, tzinfo=UTC)


@pytest.fixture(params=ADAPTER_PARAMS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[JobStore]:
    async for adapter in ADAPTERS[request.param](tmp_path):
        yield adapter


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


async def test_insert_then_get_round_trips_every_field(store: JobStore) -> None:
    job = make_job(
        payload={"message": "héllo", "list": [1, 2.5, None, True]},
        priority=-3,
        template_id=new_job_id(),
    )
    stored = await store.insert(job)
    assert stored == job
    assert await store.get(job.id) == job


async def test_duplicate_insert_names_the_job_holding_the_key(store: JobStore) -> None:
    holder = await store.insert(make_job(key="taken"))
    with pytest.raises(DuplicateJob) as caught:
        await store.insert(make_job(key="taken"))
    assert caught.value.existing_id == holder.id


async def test_get_unknown_id_raises_job_not_found(store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        await store.get(new_job_id())


async def test_duplicate_idempotency_key_is_rejected(store: JobStore) -> None:
    await store.insert(make_job(key="same"))
    with pytest.raises(DuplicateJob):
        await store.insert(make_job(key="same"))


async def test_concurrent_inserts_of_one_key_store_exactly_one(store: JobStore) -> None:
    outcomes: list[str] = []

    async def attempt() -> None:
        try:
            await store.insert(make_job(key="racy"))
            outcomes.append("ok")
        except DuplicateJob:
            outcomes.append("dup")

    async with trio.open_nursery() as nursery:
        for _ in range(30):
            nursery.start_soon(attempt)
    assert outcomes.count("ok") == 1
    assert outcomes.count("dup") == 29


async def test_list_is_newest_first_filtered_and_limited(store: JobStore) -> None:
    for i in range(5):
        await store.insert(make_job(created_at=NOW + timedelta(seconds=i), key=f"a{i}"))
    await store.insert(make_job(tenant="tenant-b"))
    jobs = await store.list_jobs("tenant-a", None, 100)
    assert [j.idempotency_key for j in jobs] == ["a4", "a3", "a2", "a1", "a0"]
    assert [j.idempotency_key for j in await store.list_jobs("tenant-a", None, 2)] == ["a4", "a3"]
    await store.claim_due(NOW, 1)
    queued = await store.list_jobs("tenant-a", Status.QUEUED, 100)
    assert len(queued) == 1
    assert queued[0].status is Status.QUEUED
    assert await store.list_jobs("tenant-zzz", None, 100) == []


async def test_claim_orders_by_priority_then_oldest_and_skips_future_and_templates(
    store: JobStore,
) -> None:
    low_old = await store.insert(make_job(priority=1, scheduled_at=NOW - timedelta(seconds=9)))
    high_new = await store.insert(make_job(priority=5, scheduled_at=NOW - timedelta(seconds=1)))
    high_old = await store.insert(make_job(priority=5, scheduled_at=NOW - timedelta(seconds=5)))
    await store.insert(make_job(priority=9, scheduled_at=NOW + timedelta(seconds=1)))
    await store.insert(make_job(priority=9, cron="* * * * *", scheduled_at=NOW))

    first = await store.claim_due(NOW, 2)
    assert [j.id for j in first] == [high_old.id, high_new.id]
    assert all(j.status is Status.QUEUED and j.queued_at == NOW for j in first)
    rest = await store.claim_due(NOW, 10)
    assert [j.id for j in rest] == [low_old.id]
    assert await store.claim_due(NOW, 10) == []


async def test_concurrent_claimers_never_claim_a_job_twice(store: JobStore) -> None:
    for i in range(300):
        await store.insert(make_job(priority=i % 7))
    claimed: list[str] = []

    async def claimer() -> None:
        while batch := await store.claim_due(NOW, 7):
            claimed.extend(j.id for j in batch)

    async with trio.open_nursery() as nursery:
        for _ in range(6):
            nursery.start_soon(claimer)
    assert len(claimed) == 300
    assert len(set(claimed)) == 300


async def test_due_templates_and_next_due_at(store: JobStore) -> None:
    assert await store.next_due_at() is None
    template = await store.insert(make_job(cron="*/5 * * * *", scheduled_at=NOW))
    await store.insert(make_job(scheduled_at=NOW + timedelta(minutes=1)))
    assert [t.id for t in await store.due_templates(NOW, 10)] == [template.id]
    assert await store.due_templates(NOW - timedelta(seconds=1), 10) == []
    assert await store.next_due_at() == NOW


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


async def test_count_by_status(store: JobStore) -> None:
    await store.insert(make_job())
    await store.insert(make_job())
    await store.claim_due(NOW, 1)
    counts = await store.count_by_status()
    assert counts[Status.PENDING] == 1
    assert counts[Status.QUEUED] == 1
    assert counts[Status.COMPLETED] == 0


async def test_ping_answers_while_the_store_is_up_and_fails_as_store_error_once_closed(
    store: JobStore,
) -> None:
    # The readiness probe's store check (issue 8).
    await store.ping()
    await store.close()
    with pytest.raises(StoreError):
        await store.ping()


# ------------------------------------------------------------ results and attempt records


async def test_complete_stores_any_json_result(store: JobStore) -> None:
    result = {
        "a.b": 1,
        "$where": "not an operator here",
        "big": 2**70,
        "list": [1.5, None, "é", {"nested": True}],
    }
    running = await running_job(store)
    done = await store.apply(states.complete(running, token="tok-1", now=NOW, result=result))
    assert done is not None
    assert done.result == result
    assert (await store.get(running.id)).result == result


async def test_an_applied_outcome_appends_its_attempt_record(store: JobStore) -> None:
    running = await running_job(store, max_attempts=3)
    try:
        raise ValueError("bad address")
    except ValueError as exc:
        failure = Failure.from_exception(exc)
    later = NOW + timedelta(seconds=3)
    assert await store.apply(states.fail(running, token="tok-1", now=later, error=failure))
    [again] = await store.claim_due(NOW + timedelta(minutes=1), 1)
    _picked, second = await store.apply_many(
        [
            states.pick(again.id, worker="w2", token="t2", now=later),
            states.start(again.id, token="t2", now=later),
        ]
    )
    assert second is not None
    assert second.attempts == 2
    end = NOW + timedelta(seconds=9)
    assert await store.apply(states.complete(second, token="t2", now=end, result=[1]))

    failed, completed = await store.attempts(running.id)
    assert failed == Attempt(
        job_id=running.id,
        number=1,
        outcome=Outcome.FAILED,
        worker="w1",
        started_at=NOW,
        finished_at=later,
        error_type="ValueError",
        error_message="bad address",
        traceback=failure.traceback,
    )
    assert completed == Attempt(
        job_id=running.id,
        number=2,
        outcome=Outcome.COMPLETED,
        worker="w2",
        started_at=later,
        finished_at=end,
    )


async def test_apply_many_records_only_the_outcomes_that_applied(store: JobStore) -> None:
    first = await running_job(store, token="a")
    second = await running_job(store, token="b")
    results = await store.apply_many(
        [
            states.complete(first, token="a", now=NOW),
            states.complete(second, token="wrong", now=NOW),
        ]
    )
    assert [r is not None for r in results] == [True, False]
    assert [a.outcome for a in await store.attempts(first.id)] == [Outcome.COMPLETED]
    assert await store.attempts(second.id) == []


async def test_apply_many_lean_reads_back_only_the_jobs_asked_for(store: JobStore) -> None:
    # A pick that applies reports True (no row), its start the running job; a pick and a
    # completion that lose report False; a completion that applies reports True and still
    # records its attempt, and every change was applied as apply_many would.
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    other = await running_job(store, token="b")
    results = await store.apply_many_lean(
        [
            states.pick(job.id, worker="w", token="t", now=NOW),
            states.start(job.id, token="t", now=NOW),
            states.pick(job.id, worker="w2", token="t2", now=NOW),
            states.complete(other, token="wrong", now=NOW),
            states.complete(other, token="b", now=NOW),
        ],
        [False, True, False, False, False],
    )
    assert results[0] is True
    running = results[1]
    assert isinstance(running, Job)
    assert (running.status, running.claim_token, running.attempts) == (Status.RUNNING, "t", 1)
    assert results[2:] == [False, False, True]
    assert await store.get(job.id) == running
    assert (await store.get(other.id)).status is Status.COMPLETED
    assert [a.outcome for a in await store.attempts(other.id)] == [Outcome.COMPLETED]


async def test_apply_bulk_counts_the_changes_that_applied(store: JobStore) -> None:
    first = await running_job(store, token="a")
    second = await running_job(store, token="b")
    applied = await store.apply_bulk(
        [
            states.complete(first, token="a", now=NOW),
            states.complete(second, token="wrong", now=NOW),
        ]
    )
    assert applied == 1
    assert (await store.get(first.id)).status is Status.COMPLETED
    assert (await store.get(second.id)).status is Status.RUNNING


async def test_a_record_written_twice_is_kept_once(store: JobStore) -> None:
    # One record per (job, number, outcome): a repeated write (a retried request, a second
    # release of the same attempt number) keeps the first, so a job's history is bounded.
    job = await store.insert(make_job())
    for i in range(2):
        await store.claim_due(NOW, 1)
        claimed = await store.apply(states.pick(job.id, worker="w", token=f"t{i}", now=NOW))
        running = await store.apply(states.start(job.id, token=f"t{i}", now=NOW))
        assert claimed is not None
        assert running is not None
        at = NOW + timedelta(seconds=i)
        released = await store.apply(states.release(running, token=f"t{i}", now=at))
        assert released is not None
        assert released.attempts == 0
    [record] = await store.attempts(job.id)
    assert (record.number, record.outcome, record.finished_at) == (1, Outcome.RELEASED, NOW)


async def test_attempts_of_an_unknown_job_are_empty(store: JobStore) -> None:
    assert await store.attempts(new_job_id()) == []


async def test_prune_attempts_deletes_records_finished_before_the_cutoff(store: JobStore) -> None:
    old = await running_job(store, token="a")
    assert await store.apply(states.complete(old, token="a", now=NOW))
    new = await running_job(store, token="b")
    assert await store.apply(states.complete(new, token="b", now=NOW + timedelta(days=2)))
    assert await store.prune_attempts(NOW + timedelta(days=1)) == 1
    assert await store.attempts(old.id) == []
    assert len(await store.attempts(new.id)) == 1
    assert await store.prune_attempts(NOW + timedelta(days=1)) == 0


# ------------------------------------------------------------------------ bulk insert


async def test_insert_many_answers_each_job_in_order(store: JobStore) -> None:
    holder = await store.insert(make_job(key="taken"))
    jobs = [
        make_job(key="new-1"),
        make_job(key="taken"),
        make_job(key="new-2"),
        make_job(key="new-1"),  # a later duplicate inside the batch: the first wins
    ]
    outcomes = await store.insert_many(jobs)
    assert outcomes[0] == jobs[0]
    assert isinstance(outcomes[1], DuplicateJob)
    assert outcomes[1].existing_id == holder.id
    assert outcomes[2] == jobs[2]
    assert isinstance(outcomes[3], DuplicateJob)
    assert outcomes[3].existing_id == jobs[0].id
    assert await store.get(jobs[0].id) == jobs[0]
    assert await store.get(jobs[2].id) == jobs[2]
    for rejected in (jobs[1], jobs[3]):
        with pytest.raises(JobNotFound):
            await store.get(rejected.id)


async def test_insert_many_of_nothing_is_nothing(store: JobStore) -> None:
    assert await store.insert_many([]) == []


async def test_insert_many_stores_a_thousand_jobs(store: JobStore) -> None:
    jobs = [
        make_job(key=f"bulk-{i}", created_at=NOW + timedelta(milliseconds=i)) for i in range(1000)
    ]
    outcomes = await store.insert_many(jobs)
    assert outcomes == jobs
    assert (await store.count_by_status())[Status.PENDING] == 1000
    listed = await store.list_jobs("tenant-a", None, 5)
    assert [j.id for j in listed] == [j.id for j in reversed(jobs[-5:])]


async def test_concurrent_insert_many_store_each_key_exactly_once(store: JobStore) -> None:
    keys = [f"race-{i}" for i in range(50)]
    answers: list[list[object]] = []

    async def send() -> None:
        answers.append(list(await store.insert_many([make_job(key=k) for k in keys])))

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(send)
    for i in range(len(keys)):
        stored = [a[i] for a in answers if isinstance(a[i], Job)]
        duplicates = [a[i] for a in answers if isinstance(a[i], DuplicateJob)]
        assert len(stored) == 1
        assert len(duplicates) == 2
        assert all(d.existing_id == stored[0].id for d in duplicates)
    assert (await store.count_by_status())[Status.PENDING] == len(keys)
