"""MongoJobStore's job counters beyond the store contract, against a real server: written
beside every jobs' write, counted once for a database that has none, repaired by the
reconcile from the indexes (only a drift seen twice), and a change narrowed to its job's
status that loses a race within its statuses tried again; the counters of ended jobs
counted once for a database that has none. The ``database`` and ``store``
fixtures are in conftest.py."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from bson import ObjectId

from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.store.mongo import counts, ends, upkeep
from jobscheduler.store.mongo.store import MongoJobStore
from jobscheduler.store.query import JobQuery
from tests.contract.store_fixtures import mongo_uri
from tests.contract.store_support import NOW, make_job
from tests.support.mongo import raw

pytestmark = pytest.mark.integration

PENDING = ("tenant-a", Status.PENDING, "noop")


def _counters(fn: Any) -> Any:
    """``fn`` on the counters collection, beside the jobs (for :func:`raw`)."""
    return lambda jobs: fn(jobs.database[counts.COUNTS_COLLECTION])


async def _recount(store: MongoJobStore) -> dict[Any, int]:
    jobs = await store.find_jobs(JobQuery(tenant_id=None), 5000)
    return dict(Counter((job.tenant_id, job.status, job.job_type) for job in jobs))


@pytest.fixture(autouse=True)
def quick_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upkeep, "RECONCILE_SETTLE", 0.05)


async def test_a_lost_counters_write_is_repaired_by_the_reconcile(
    store: MongoJobStore, database: str
) -> None:
    await store.insert_many([make_job(), make_job(), make_job(tenant="t2", job_type="sms")])
    # The $inc of a write cut off after its jobs' write: one counter too many, and the
    # whole document of another pair missing.
    await raw(
        mongo_uri(),
        database,
        _counters(
            lambda c: (
                c.update_one(
                    {"_id": counts.count_id("tenant-a", "noop")}, {"$inc": {"n.pending": 3}}
                ),
                c.delete_one({"_id": counts.count_id("t2", "sms")}),
            )
        ),
    )
    assert (await store.job_counters())[PENDING] == 5
    wrong = await store.reconcile_counts()
    assert wrong == {PENDING: (5, 2), ("t2", Status.PENDING, "sms"): (0, 1)}
    assert await store.job_counters() == await _recount(store)
    assert await store.reconcile_counts() == {}


async def test_a_counter_seen_off_only_once_is_left_alone(
    store: MongoJobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.insert(make_job())
    looks = iter([{("tenant-a", "noop"): {Status.PENDING: (2, 1)}}, {}])
    monkeypatch.setattr(counts, "drifts", lambda *args: next(looks))
    assert await store.reconcile_counts() == {}
    assert (await store.job_counters())[PENDING] == 1


async def test_a_database_without_counters_gets_them_counted_at_start(
    store: MongoJobStore, database: str
) -> None:
    await store.insert_many([make_job(), make_job(status=Status.DLQ, job_type="x")])
    await raw(mongo_uri(), database, _counters(lambda c: c.drop()))
    again = MongoJobStore(mongo_uri(), database)
    await again.start()
    try:
        assert await again.job_counters() == await _recount(store)
    finally:
        await again.close()


async def test_a_cancel_racing_a_claim_still_applies_and_is_counted_from_its_status(
    store: MongoJobStore, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await store.insert(make_job())
    narrow = counts.narrow
    calls = 0

    def narrow_then_claim(jobs: Any, changes: Any) -> Any:
        # The first narrowing sees the job pending; the scheduler then queues it (its own
        # counted move) before the cancel's update lands.
        nonlocal calls
        calls += 1
        narrowed = narrow(jobs, changes)
        if calls == 1:
            jobs.update_one({"_id": ObjectId(job.id)}, {"$set": {"status": "queued"}})
            counts.write(
                jobs.database[counts.COUNTS_COLLECTION],
                {("tenant-a", "noop"): Counter({Status.PENDING: -1, Status.QUEUED: 1})},
            )
        return narrowed

    monkeypatch.setattr(counts, "narrow", narrow_then_claim)
    cancelled = await store.apply(states.cancel(job, now=NOW))
    assert cancelled is not None
    assert cancelled.status is Status.CANCELLED
    assert calls == 2
    assert await store.job_counters() == {("tenant-a", Status.CANCELLED, "noop"): 1}


async def test_a_database_without_counters_of_ends_gets_the_recent_ends_counted_once(
    store: MongoJobStore, database: str
) -> None:
    now = datetime.now(UTC)
    await store.insert_many(
        [
            make_job(status=Status.COMPLETED, created_at=now - timedelta(minutes=3)),
            make_job(status=Status.DLQ, created_at=now - timedelta(minutes=30)),
            make_job(status=Status.COMPLETED, created_at=now - timedelta(days=2)),
            make_job(created_at=now - timedelta(minutes=3)),
        ]
    )
    # As a version before the counters of ends.
    await raw(mongo_uri(), database, lambda jobs: jobs.database[ends.ENDS_COLLECTION].drop())
    for _ in range(2):  # counted at the first start only
        again = MongoJobStore(mongo_uri(), database)
        await again.start()
        try:
            overview = await again.overview_stats(None, now)
            assert (sum(overview.completed), sum(overview.failed)) == (1, 1)
            [one, five, fifteen] = (await again.stats("tenant-a", now)).windows
            assert (one.completed, five.completed, fifteen.completed) == (0, 1, 1)
        finally:
            await again.close()
