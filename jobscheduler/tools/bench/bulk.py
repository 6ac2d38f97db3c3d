"""Measure a bulk retry: N dead-lettered jobs back to pending with one ``POST /jobs/retry``
filter, on the SQLite store or a MongoDB-protocol server.

``python -m jobscheduler.tools.bench.bulk --store sqlite --jobs 10000``
``python -m jobscheduler.tools.bench.bulk --store mongo --mongo-uri mongodb://127.0.0.1:27017``

The jobs are written straight into a fresh store (a temporary SQLite file, or a fresh
database that is dropped afterwards), then the route's own code (:func:`bulk.bulk_retry`)
runs the retry, timed. Prints one line of figures; not a test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pymongo
import trio

from jobscheduler.api import bulk
from jobscheduler.bus.local import LocalBus
from jobscheduler.config import Settings
from jobscheduler.domain.model import Job, Status, new_job_id, utc
from jobscheduler.election.local import LocalElector
from jobscheduler.handlers import default_registry
from jobscheduler.roles.deps import Deps
from jobscheduler.store import JobStore
from jobscheduler.store.mongo import MongoJobStore
from jobscheduler.store.query import JobQuery
from jobscheduler.store.sqlite import SQLiteJobStore

TENANT = "bench-bulk"


def dead_job(now: datetime, i: int) -> Job:
    job_id = new_job_id()
    created = utc(now - timedelta(milliseconds=i))
    return Job(
        id=job_id,
        idempotency_key=f"bulk-{job_id}",
        tenant_id=TENANT,
        job_type="noop",
        status=Status.DLQ,
        scheduled_at=created,
        attempts=3,
        last_error="boom",
        created_at=created,
        updated_at=created,
    )


async def measure(store: JobStore, jobs: int) -> str:
    await store.start()
    now = utc(datetime.now(UTC))
    limiter = trio.CapacityLimiter(16)

    async def insert(i: int) -> None:
        async with limiter:
            await store.insert(dead_job(now, i))

    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        for i in range(jobs):
            nursery.start_soon(insert, i)
    seeded = time.monotonic() - started
    deps = Deps(
        settings=Settings(),
        store=store,
        bus=LocalBus(),
        elector=LocalElector("bench"),
        registry=default_registry(),
    )
    query = JobQuery(tenant_id=TENANT, statuses=(Status.DLQ,))
    started = time.monotonic()
    result = await bulk.bulk_retry(deps, query)
    took = time.monotonic() - started
    again = await bulk.bulk_retry(deps, query)
    counts = await store.count_by_status()
    assert result.changed == jobs == counts[Status.PENDING], (result, counts)
    assert again.changed == 0
    return (
        f"bulk retry of {jobs:,} dlq jobs: {took:.2f} s ({jobs / took:,.0f} jobs/s, "
        f"{bulk.BULK_BATCH} per page); repeat: {again.matched} matched; "
        f"seeding took {seeded:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["sqlite", "mongo"], default="sqlite")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--mongo-uri", default="mongodb://127.0.0.1:27017")
    args = parser.parse_args()
    if args.store == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteJobStore(Path(tmp) / "jobs.db")
            print("sqlite:", trio.run(measure, store, args.jobs))
            trio.run(store.close)
        return
    database = f"js_bench_bulk_{uuid.uuid4().hex[:8]}"
    mongo = MongoJobStore(args.mongo_uri, database, socket_timeout=120.0)
    try:
        print("mongo:", trio.run(measure, mongo, args.jobs))
    finally:
        trio.run(mongo.close)
        client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(args.mongo_uri)
        client.drop_database(database)
        client.close()


if __name__ == "__main__":
    main()
