"""The JobStore contract: ONE suite, run against every adapter.

What a store must promise for the roles to be correct under concurrency: unique
idempotency keys, atomic priority-ordered claims that never hand a job out twice, and
conditional transitions that a stale claim token can never satisfy.

This file holds inserts (one by one and in bulk), reads, listing, claims, due templates,
counts and the readiness ping. Its siblings hold the rest of the contract:
``test_store_transitions.py`` (conditional state changes and claim tokens) and
``test_store_attempts.py`` (results and attempt records). The ``store`` fixture (every
adapter) lives in ``conftest.py``, the job builders in ``store_support.py``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import trio

from jobscheduler.domain.model import Job, Status, new_job_id
from jobscheduler.errors import DuplicateJob, JobNotFound, StoreError
from jobscheduler.store import JobStore

from .store_support import NOW, make_job


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


async def test_the_same_job_inserted_twice_is_a_duplicate_naming_itself(store: JobStore) -> None:
    # Two schedulers spawning one fire time insert the run under the id the ledger holds:
    # the second insert repeats the first job exactly, id included.
    job = await store.insert(make_job())
    with pytest.raises(DuplicateJob) as caught:
        await store.insert(job)
    assert caught.value.existing_id == job.id
    assert await store.get(job.id) == job


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
    # The readiness probe's store check.
    await store.ping()
    await store.close()
    with pytest.raises(StoreError):
        await store.ping()


async def test_a_closed_store_refuses_reads_and_writes_with_store_error(store: JobStore) -> None:
    job = await store.insert(make_job())
    await store.close()
    with pytest.raises(StoreError):
        await store.get(job.id)
    with pytest.raises(StoreError):
        await store.insert(make_job())
    with pytest.raises(StoreError):
        await store.claim_due(NOW, 10)
    with pytest.raises(StoreError):
        await store.list_jobs("tenant-a", None, 10)


async def test_values_given_to_or_read_from_the_store_share_nothing_with_it(
    store: JobStore,
) -> None:
    payload: dict[str, object] = {"items": [1, 2], "nested": {"a": "b"}}
    job = make_job(payload=payload)
    stored = await store.insert(job)
    payload["items"].append(3)  # type: ignore[attr-defined]
    payload["nested"]["a"] = "changed"  # type: ignore[index]
    read = await store.get(job.id)
    assert read.payload == {"items": [1, 2], "nested": {"a": "b"}}
    stored.payload["items"].append(4)
    read.payload["nested"]["a"] = "changed too"
    [listed] = await store.list_jobs("tenant-a", None, 10)
    listed.payload.clear()
    assert (await store.get(job.id)).payload == {"items": [1, 2], "nested": {"a": "b"}}


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
