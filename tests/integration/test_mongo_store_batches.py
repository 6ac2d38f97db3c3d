"""MongoJobStore's claims and batches against a real server: concurrent claimers, chunks
within the server's limits, and counts of what a batch changed (see test_mongo_store.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import trio
from pymongo import UpdateOne

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.store.mongo import MongoJobStore
from jobscheduler.store.mongo.batch import (
    MAX_CHUNK_BYTES,
    MAX_STATEMENTS,
    chunks,
    marked,
    new_mark,
    statement_size,
)
from jobscheduler.store.mongo.codec import chain, change_filter, update_document
from tests.contract.store_fixtures import mongo_uri
from tests.contract.store_support import NOW, make_job

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("claim_each", [True, False], ids=["statement-each", "update-many"])
async def test_concurrent_claimers_take_the_highest_priority_first_and_never_share_a_job(
    database: str, claim_each: bool
) -> None:
    # Two stores (two clients, as two scheduler processes would have), three claimers each.
    store = MongoJobStore(mongo_uri(), database, claim_each=claim_each)
    other = MongoJobStore(mongo_uri(), database, claim_each=claim_each)
    await store.start()
    await other.start()
    try:
        high = await store.insert(make_job(priority=5))
        for i in range(40):
            await store.insert(make_job(priority=i % 3))
        first = await store.claim_due(NOW, 1)
        assert [j.id for j in first] == [high.id]
        claimed: list[str] = []

        async def claimer(claiming: MongoJobStore) -> None:
            # A batch comes back short (even empty) when others took its candidates first;
            # whoever took them keeps going, so all 40 are claimed in the end.
            while batch := await claiming.claim_due(NOW, 3):
                assert [j.priority for j in batch] == sorted(
                    (j.priority for j in batch), reverse=True
                )
                claimed.extend(j.id for j in batch)

        async with trio.open_nursery() as nursery:
            for claiming in (store, other) * 3:
                nursery.start_soon(claimer, claiming)
        assert len(claimed) == 40
        assert len(set(claimed)) == 40
    finally:
        await store.close()
        await other.close()


# ---------------------------------------------------------------------------- batches


async def test_full_chunks_of_a_batch_go_through_the_server_within_its_limits(
    database: str,
) -> None:
    # FerretDB never answers a multi-statement update of 100 statements, or of about 16 KB
    # of them: batches are chunked below both, and a chunk of the maximum size (by count,
    # then by bytes) must come back well within a short socket timeout.
    store = MongoJobStore(mongo_uri(), database, socket_timeout=10.0)
    await store.start()
    try:
        jobs = await store.insert_many([make_job() for _ in range(MAX_STATEMENTS * 2 + 7)])
        assert await store.claim_due(NOW, len(jobs)) != []
        ids = [j.id for j in jobs if isinstance(j, Job)]
        changes: list[states.Change] = []
        for i, job_id in enumerate(ids):
            changes.append(states.pick(job_id, worker="worker-1", token=f"{i:032d}", now=NOW))
            changes.append(states.start(job_id, token=f"{i:032d}", now=NOW))
        # Each pick+start is one statement; the first chunk is full (one more would not fit).
        mark = new_mark()
        sizes = [
            statement_size(change_filter(c), marked(update_document(c), mark))
            for c in (chain(changes[i], changes[i + 1]) for i in range(0, len(changes), 2))
            if c is not None
        ]
        first = chunks(sizes)[0]
        assert len(first) == MAX_STATEMENTS or sum(sizes[: len(first) + 1]) > MAX_CHUNK_BYTES
        with trio.fail_after(30):
            started = await store.apply_many(changes)
        running = [job for job in started[1::2] if job is not None]
        assert [(j.status, j.claim_token) for j in running] == [
            (Status.RUNNING, f"{i:032d}") for i in range(len(ids))
        ]
        # Results of 1 KB: these chunks are full by bytes; one of 40 KB goes alone.
        results = [{"blob": "x" * (40_000 if i == 3 else 1_000)} for i in range(len(running))]
        outcomes = [
            states.complete(job, token=job.claim_token or "", now=NOW, result=result)
            for job, result in zip(running, results, strict=True)
        ]
        with trio.fail_after(30):
            completed = await store.apply_many(outcomes)
        assert [j.status if j else None for j in completed] == [Status.COMPLETED] * len(ids)
        assert (await store.get(ids[3])).result == results[3]
        assert len(await store.attempts(ids[-1])) == 1
    finally:
        await store.close()


async def test_a_batch_reports_exactly_the_changes_whose_condition_held(
    store: MongoJobStore,
) -> None:
    jobs = [await store.insert(make_job()) for _ in range(5)]
    await store.claim_due(NOW, 5)
    # Two of them are taken by another executor first.
    for job in jobs[1:3]:
        assert await store.apply(states.pick(job.id, worker="x", token="x", now=NOW))
    picks = [states.pick(j.id, worker="w", token=f"t{i}", now=NOW) for i, j in enumerate(jobs)]
    results = await store.apply_many(picks)
    assert [r.claim_token if r else None for r in results] == ["t0", None, None, "t3", "t4"]


async def test_bulk_retry_counts_every_job_even_when_the_scheduler_claims_them_at_once(
    store: MongoJobStore,
) -> None:
    # Regression: the batch's count came from reading back its mark, which a claim of the
    # retried (due) jobs could overwrite first; 1,000 retries on the distributed roles then
    # reported fewer than 1,000 changed. The count is the servers' matched count now, and a
    # claim marks a field of its own.
    inserted = await store.insert_many([make_job() for _ in range(120)])
    jobs = [job for job in inserted if isinstance(job, Job)]
    cancelled = await store.apply_many([states.cancel(job, now=NOW) for job in jobs])
    retries = [states.retry(job, now=NOW) for job in cancelled if job is not None]
    assert len(retries) == 120
    claimed: list[Job] = []
    done = trio.Event()

    async def claimer() -> None:
        while not done.is_set():
            claimed.extend(await store.claim_due(NOW, 7))
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(claimer)
        assert await store.apply_bulk(retries) == 120
        done.set()
    claimed.extend(await store.claim_due(NOW, 200))
    assert sorted(j.id for j in claimed) == sorted(j.id for j in jobs)


async def running_jobs(store: MongoJobStore, count: int) -> list[Job]:
    jobs = [await store.insert(make_job()) for _ in range(count)]
    await store.claim_due(NOW, count)
    running = await store.apply_many(
        [
            change
            for i, job in enumerate(jobs)
            for change in (
                states.pick(job.id, worker="w", token=f"t{i}", now=NOW),
                states.start(job.id, token=f"t{i}", now=NOW),
            )
        ]
    )
    return [job for job in running[1::2] if job is not None]


#: When :func:`beating`'s heartbeats are sent.
BEAT_AT = NOW + timedelta(seconds=5)


async def beating(store: MongoJobStore, count: int) -> tuple[list[Job], list[states.Change]]:
    """``count`` running jobs, and a heartbeat of each at :data:`BEAT_AT`."""
    running = await running_jobs(store, count)
    beats = [states.heartbeat(j.id, token=j.claim_token or "", now=BEAT_AT) for j in running]
    return running, beats


def rewrite_before_read_back(store: MongoJobStore, later: list[states.Change]) -> None:
    """Let another writer's batch land on this store's documents between a batch's writes
    and its read-back by mark (the window the judge by values exists for)."""
    read_marked = store._read_marked
    fired = False

    def interleaved(*args: Any, **kwargs: Any) -> Any:
        nonlocal fired
        if not fired:
            fired = True
            other = MongoJobStore(mongo_uri(), store._database)
            other_jobs = other._new_client(retry_writes=False)
            try:
                statements = [
                    UpdateOne(change_filter(c), marked(update_document(c), new_mark()))
                    for c in later
                ]
                other_jobs.get_database(store._database)["jobs"].bulk_write(statements)
            finally:
                other_jobs.close()
        return read_marked(*args, **kwargs)

    store._read_marked = interleaved  # type: ignore[method-assign]


async def test_a_change_re_marked_by_a_later_batch_but_holding_its_values_counts_as_applied(
    store: MongoJobStore,
) -> None:
    # The judge of a batch: what carries its mark applied; a document that matched but was
    # re-marked by another batch before the read-back is judged by whether it still holds
    # what this batch's change wrote.
    _, beats = await beating(store, 3)
    rewrite_before_read_back(store, [beats[0]])  # the same values, another mark
    results = await store.apply_many(beats)
    assert [r.heartbeat_at if r else None for r in results] == [BEAT_AT] * 3


async def test_a_change_overwritten_before_its_read_back_is_reported_as_not_applied(
    store: MongoJobStore,
) -> None:
    # The other side of the judge: a document that another batch changed to other values
    # before the read-back is reported as not applied (the caller treats it as a lost race;
    # every transition after it is conditional, so nothing acts on a stale belief).
    running, beats = await beating(store, 3)
    later = BEAT_AT + timedelta(seconds=1)
    done = states.complete(running[0], token=running[0].claim_token or "", now=later)
    rewrite_before_read_back(store, [done])
    results = await store.apply_many(beats)
    assert [r is not None for r in results] == [False, True, True]
    assert (await store.get(running[0].id)).status is Status.COMPLETED
