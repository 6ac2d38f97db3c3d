"""``just bench-ui``: how long each dashboard page, and each API read its script makes, takes
with many jobs in the store.

It fills a fresh store (SQLite in a temporary file, or a fresh MongoDB database with
``--store mongo``, ``MONGO_URI`` default ``mongodb://127.0.0.1:27017``) with ``--jobs`` jobs of
one tenant (completed, pending and dead-lettered, several job types) through the store port's
``insert_many``, then asks the API app in process (ASGI, no socket) for each page ``--rounds``
times and prints the median and the slowest answer.

Usage: ``python -m tests.support.ui_bench [--store sqlite|mongo] [--jobs 100000]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pymongo
import trio

from jobscheduler.api import create_app
from jobscheduler.bus.local import LocalBus
from jobscheduler.config import Settings
from jobscheduler.domain.model import Job, Status, new_job_id
from jobscheduler.election.local import LocalElector
from jobscheduler.handlers import default_registry
from jobscheduler.roles.deps import Deps
from jobscheduler.store import JobStore
from jobscheduler.store.base import MAX_INSERT_MANY
from jobscheduler.store.mongo import MongoJobStore
from jobscheduler.store.sqlite import SQLiteJobStore

TENANT = "bench"
#: (status, job type, share of the jobs): a store that has been running for a while.
MIX = [
    (Status.COMPLETED, "noop", 0.70),
    (Status.PENDING, "slow", 0.15),
    (Status.DLQ, "flaky", 0.10),
    (Status.DLQ, "http", 0.05),
]


def pick(index: int) -> tuple[Status, str]:
    """The status and job type of the ``index``-th job: the MIX's shares, well spread."""
    point = (index * 0.618034) % 1.0
    for status, job_type, share in MIX:
        if point < share:
            return status, job_type
        point -= share
    return MIX[-1][0], MIX[-1][1]


def make_jobs(count: int, now: datetime) -> list[Job]:
    jobs = []
    for index in range(count):
        status, job_type = pick(index)
        created = now - timedelta(seconds=count - index)
        jobs.append(
            Job(
                id=new_job_id(),
                idempotency_key=f"bench-{index}",
                tenant_id=TENANT,
                job_type=job_type,
                payload={"n": index},
                status=status,
                scheduled_at=created if status is not Status.PENDING else now + timedelta(days=1),
                attempts=0 if status is Status.PENDING else 1,
                max_attempts=1,
                last_error=f"{job_type}: failed" if status is Status.DLQ else None,
                created_at=created,
                updated_at=created,
            )
        )
    return jobs


async def fill(store: JobStore, count: int) -> None:
    jobs = make_jobs(count, datetime.now(UTC))
    for start in range(0, len(jobs), MAX_INSERT_MANY):
        await store.insert_many(jobs[start : start + MAX_INSERT_MANY])


async def measure(store: JobStore, settings: Settings, rounds: int) -> None:
    deps = Deps(
        settings=settings,
        store=store,
        bus=LocalBus(),
        elector=LocalElector("bench"),
        registry=default_registry(),
    )
    app = create_app(deps)
    async with app.test_app() as test_app:
        client = test_app.test_client()
        dlq = await (await client.get(f"/jobs?tenantId={TENANT}&status=dlq&limit=1")).get_json()
        job_id = dlq[0]["id"]
        paths = [
            "/ui",
            "/stats/overview",
            f"/stats/overview?tenantId={TENANT}",
            f"/ui/jobs?tenantId={TENANT}",
            f"/ui/jobs/{job_id}",
            f"/jobs?tenantId={TENANT}&limit=50",
            f"/jobs?tenantId={TENANT}&status=dlq&limit=50",
            f"/jobs/{job_id}",
            f"/jobs/{job_id}/attempts",
            f"/ui/dead-letters?tenantId={TENANT}",
            f"/jobs?tenantId={TENANT}&status=dlq&limit=250",  # a Dead letters page
            f"/ui/cron?tenantId={TENANT}",
            f"/jobs?tenantId={TENANT}&cron=true&limit=1000",  # the Cron page
            # The views of every tenant (an all-tenant admin, AUTH=off) and their reads.
            "/ui/jobs",
            "/jobs?allTenants=true&limit=50",
            "/jobs?allTenants=true&status=dlq&limit=250",
            "/jobs?allTenants=true&cron=true&limit=1000",
            "/tenants",
        ]
        for path in paths:
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                response = await client.get(path)
                await response.get_data()
                times.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    break
            if response.status_code != 200:
                print(f"{path[:60]:60s} answered {response.status_code} after {times[-1]:.0f} ms")
                continue
            print(
                f"{path[:60]:60s} median {statistics.median(times):7.1f} ms"
                f"   max {max(times):7.1f} ms"
            )


def drop_database(uri: str, database: str) -> None:
    with pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000) as client:
        client.drop_database(database)


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            sqlite_path=str(Path(tmp) / "jobs.db"), api_store_timeout=args.store_timeout
        )
        store: JobStore
        uri = os.environ.get("MONGO_URI", "mongodb://127.0.0.1:27017")
        database = f"ui_bench_{os.getpid()}"
        if args.store == "mongo":
            store = MongoJobStore(uri, database)
        else:
            store = SQLiteJobStore(settings.sqlite_path)
        await store.start()
        try:
            started = time.perf_counter()
            await fill(store, args.jobs)
            print(f"{args.store}: {args.jobs} jobs stored in {time.perf_counter() - started:.1f} s")
            await measure(store, settings, args.rounds)
        finally:
            await store.close()
            if args.store == "mongo":
                await trio.to_thread.run_sync(drop_database, uri, database)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "mongo"), default="sqlite")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--store-timeout", type=float, default=30.0, help="API_STORE_TIMEOUT, seconds"
    )
    trio.run(main, parser.parse_args())
