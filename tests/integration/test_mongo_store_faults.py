"""MongoJobStore when requests or replies are lost, or the server goes away (see
test_mongo_store.py).

A :class:`~tests.support.mongo.FaultProxy` between the store and the server drops one
chosen request, or swallows the server's reply to it after the server has executed it, and
then cuts the connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, Literal

import pymongo
import pymongo.errors
import pytest
import trio
from bson import ObjectId

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.errors import StoreError
from jobscheduler.store.mongo import MongoJobStore
from tests.contract.store_fixtures import mongo_uri
from tests.contract.store_support import NOW, make_job
from tests.support.mongo import (
    FIND_AND_MODIFY,
    INSERT,
    UPDATE,
    FaultProxy,
    raw,
    server_address,
    via,
)
from tests.support.stores import started

pytestmark = pytest.mark.integration


@pytest.fixture
async def proxy(nursery: trio.Nursery) -> AsyncIterator[tuple[FaultProxy, str]]:
    """A fault proxy in front of the server, and the store URI that goes through it."""
    fault_proxy = FaultProxy(server_address(mongo_uri()))
    port = await nursery.start(fault_proxy.run)
    yield fault_proxy, via(mongo_uri(), port)
    fault_proxy.stop()


@pytest.fixture(params=[None, False], ids=["claim-default", "claim-update-many"])
async def proxied_store(
    request: pytest.FixtureRequest, proxy: tuple[FaultProxy, str], database: str
) -> AsyncIterator[tuple[MongoJobStore, FaultProxy]]:
    # Claims go as one update_many on MongoDB and as statements per job on FerretDB (the
    # default there): both ways are run against the test server.
    fault_proxy, uri = proxy
    store = MongoJobStore(
        uri, database, server_selection_timeout=5.0, socket_timeout=5.0, claim_each=request.param
    )
    async with started(store):
        yield store, fault_proxy


# ---------------------------------------------------------------------------- server going away


async def test_server_going_away_gives_store_error_within_the_timeout(
    proxy: tuple[FaultProxy, str], database: str
) -> None:
    fault_proxy, uri = proxy
    store = MongoJobStore(uri, database, server_selection_timeout=0.5)
    await store.start()
    try:
        job = await store.insert(make_job())
        fault_proxy.stop()
        for call in (
            lambda: store.get(job.id),
            lambda: store.apply(states.pick(job.id, worker="w", token="t", now=NOW)),
            lambda: store.claim_due(NOW, 10),
            lambda: store.insert(make_job()),
        ):
            started = trio.current_time()
            with trio.fail_after(10), pytest.raises(StoreError):
                await call()
            assert trio.current_time() - started < 5.0
    finally:
        await store.close()


# ---------------------------------------------------------------------------- lost replies


async def pick_losing_its(
    proxied_store: tuple[MongoJobStore, FaultProxy], lost: Literal["request", "reply"]
) -> tuple[Job, Job]:
    """A queued job picked by ``w1`` (token ``t1``) while the proxy loses the pick's request
    or reply once: (the job as inserted, what the pick returned)."""
    store, fault_proxy = proxied_store
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    fault_proxy.lose_next(FIND_AND_MODIFY, lost)
    picked = await store.apply(states.pick(job.id, worker="w1", token="t1", now=NOW))
    assert fault_proxy.fired.is_set()
    assert picked is not None
    return job, picked


async def test_apply_whose_reply_was_lost_returns_the_job_it_updated(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, _ = proxied_store
    job, picked = await pick_losing_its(proxied_store, "reply")
    assert picked.status is Status.CLAIMED
    assert picked.claim_token == "t1"
    # The write is not applied twice and a second picker still loses.
    assert await store.apply(states.pick(job.id, worker="w2", token="t2", now=NOW)) is None


async def test_apply_whose_request_was_lost_is_sent_again(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, _ = proxied_store
    job, picked = await pick_losing_its(proxied_store, "request")
    assert picked.claim_token == "t1"
    assert (await store.get(job.id)).claim_token == "t1"


async def test_apply_that_lost_the_race_still_returns_none_after_a_lost_reply(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    job = await store.insert(make_job())  # pending: a pick's expectation does not hold
    fault_proxy.lose_next(FIND_AND_MODIFY, "reply")
    assert await store.apply(states.pick(job.id, worker="w", token="t", now=NOW)) is None
    assert fault_proxy.fired.is_set()
    assert (await store.get(job.id)).status is Status.PENDING


async def test_insert_whose_reply_was_lost_returns_the_job_not_a_duplicate(
    proxied_store: tuple[MongoJobStore, FaultProxy], database: str
) -> None:
    store, fault_proxy = proxied_store
    job = make_job(key="once")
    fault_proxy.lose_next(INSERT, "reply")
    assert await store.insert(job) == job
    assert fault_proxy.fired.is_set()
    count = await raw(
        mongo_uri(), database, lambda c: c.count_documents({"idempotencyKey": "once"})
    )
    assert count == 1


async def test_claim_whose_reply_was_lost_neither_loses_nor_doubles_a_job(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    jobs = [await store.insert(make_job(priority=p)) for p in (3, 2, 1)]
    # The claim's one update_many lands, its reply is lost: the read-back by the batch's
    # mark still finds exactly the jobs it moved, in claim order.
    fault_proxy.lose_next(UPDATE, "reply")
    claimed = await store.claim_due(NOW, 10)
    assert fault_proxy.fired.is_set()
    assert [j.id for j in claimed] == [j.id for j in jobs]
    assert all(j.status is Status.QUEUED for j in claimed)
    assert await store.claim_due(NOW, 10) == []


async def test_claim_whose_request_was_lost_claims_nothing_and_leaves_the_jobs_due(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    jobs = [await store.insert(make_job(priority=p)) for p in (2, 1)]
    fault_proxy.lose_next(UPDATE, "request")
    assert await store.claim_due(NOW, 10) == []
    assert fault_proxy.fired.is_set()
    assert [j.id for j in await store.claim_due(NOW, 10)] == [j.id for j in jobs]


async def queued(store: MongoJobStore, *priorities: int) -> list[Job]:
    """A job of each priority, inserted and then claimed (queued)."""
    jobs = [await store.insert(make_job(priority=p)) for p in priorities]
    await store.claim_due(NOW, 10)
    return jobs


async def test_a_batch_whose_reply_was_lost_reports_each_job_it_changed(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    jobs = await queued(store, 3, 2, 1)
    await store.apply(states.pick(jobs[2].id, worker="other", token="taken", now=NOW))
    fault_proxy.lose_next(UPDATE, "reply")
    picks = [states.pick(j.id, worker="w", token=f"t{i}", now=NOW) for i, j in enumerate(jobs)]
    results = await store.apply_many(picks)
    assert fault_proxy.fired.is_set()
    assert [r.claim_token if r else None for r in results] == ["t0", "t1", None]
    assert (await store.get(jobs[2].id)).claim_token == "taken"


async def test_a_batch_whose_request_was_lost_is_sent_again_once(
    proxied_store: tuple[MongoJobStore, FaultProxy],
) -> None:
    store, fault_proxy = proxied_store
    jobs = await queued(store, 3, 2, 1)
    fault_proxy.lose_next(UPDATE, "request")
    changes: list[states.Change] = []
    for i, job in enumerate(jobs):
        changes.append(states.pick(job.id, worker="w", token=f"t{i}", now=NOW))
        changes.append(states.start(job.id, token=f"t{i}", now=NOW))
    results = await store.apply_many(changes)
    assert fault_proxy.fired.is_set()
    running = results[1::2]
    assert [(r.status, r.attempts) if r else None for r in running] == [(Status.RUNNING, 1)] * 3
    assert [r.status if r else None for r in results[0::2]] == [Status.CLAIMED] * 3
    # Started once each, not twice.
    assert [(await store.get(j.id)).attempts for j in jobs] == [1, 1, 1]


class _LandsThenMoves:
    """A jobs collection whose next ``find_one_and_update`` lands, then sees the job moved on
    by others (``move``), then loses its reply: what a pick meets when its reply is late
    enough for the reaper to re-pend the job and the scheduler to queue it again."""

    def __init__(self, collection: Any, move: Callable[[], None]) -> None:
        self._collection = collection
        self._move = move
        self.fired = False

    def find_one_and_update(self, *args: Any, **kwargs: Any) -> Any:
        if self.fired:
            return self._collection.find_one_and_update(*args, **kwargs)
        self.fired = True
        self._collection.find_one_and_update(*args, **kwargs)
        self._move()
        raise pymongo.errors.AutoReconnect("reply lost")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._collection, name)


async def test_a_pick_whose_reply_was_lost_is_not_sent_again_to_a_later_state_of_its_job(
    store: MongoJobStore, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    later = NOW + timedelta(seconds=8)

    def requeued_by_others() -> None:  # the reaper's recovery, then the scheduler's claim
        client: pymongo.MongoClient[dict[str, Any]]
        with pymongo.MongoClient(mongo_uri()) as client:
            client[database]["jobs"].update_one(
                {"_id": ObjectId(job.id)},
                {"$set": {"status": "queued", "claimToken": None, "updatedAt": later}},
            )

    moving = _LandsThenMoves(store._collection(), requeued_by_others)
    monkeypatch.setattr(store, "_collection", lambda: moving)
    pick = states.pick(job.id, worker="w1", token="t1", now=NOW)
    assert await store.apply(pick) is None  # not applied again to the re-queued job
    assert moving.fired
    current = await store.get(job.id)
    assert (current.status, current.claim_token) == (Status.QUEUED, None)
    # A pick made after the job moved still takes it.
    fresh = states.pick(job.id, worker="w2", token="t2", now=later + timedelta(seconds=1))
    picked = await store.apply(fresh)
    assert picked is not None
    assert picked.claim_token == "t2"
