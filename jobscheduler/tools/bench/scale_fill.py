"""What the bench's scale phase writes into the store (finished jobs straight through the
store port) and how it weighs the SQLite file."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from jobscheduler.domain.model import Job, Status, new_job_id
from jobscheduler.store import JobStore
from jobscheduler.store.base import MAX_INSERT_MANY

from .stack import Stack

#: (status, job type, share): what the fill holds.
MIX = [
    (Status.COMPLETED, "noop", 0.80),
    (Status.COMPLETED, "email", 0.08),
    (Status.DLQ, "flaky", 0.05),
    (Status.CANCELLED, "report", 0.07),
]


def _pick(index: int) -> tuple[Status, str]:
    point = (index * 0.618034) % 1.0
    for status, job_type, share in MIX:
        if point < share:
            return status, job_type
        point -= share
    return MIX[-1][0], MIX[-1][1]


def fill_jobs(tenant: str, start: int, count: int, now: datetime) -> list[Job]:
    """``count`` finished jobs of ``tenant`` (the MIX), finished 8 to 9 days before ``now``."""
    jobs = []
    for index in range(start, start + count):
        status, job_type = _pick(index)
        finished = now - timedelta(days=8, seconds=index % 86400)
        jobs.append(
            Job(
                id=new_job_id(),
                idempotency_key=f"scale-{index}",
                tenant_id=tenant,
                job_type=job_type,
                payload={"n": index, "note": "a finished job kept by the scale phase"},
                status=status,
                scheduled_at=finished - timedelta(seconds=1),
                attempts=1,
                max_attempts=1,
                last_error="flaky: failed" if status is Status.DLQ else None,
                created_at=finished - timedelta(seconds=2),
                updated_at=finished,
                finished_at=finished,
            )
        )
    return jobs


def open_store(stack: Stack) -> JobStore:
    if stack.distributed:
        from jobscheduler.store.mongo import MongoJobStore

        return MongoJobStore(stack.settings.mongo_uri, stack.database)
    from jobscheduler.store.sqlite import SQLiteJobStore

    return SQLiteJobStore(stack.workdir / "bench.db")


async def fill(stack: Stack, tenant: str, count: int) -> None:
    store = open_store(stack)
    await store.start()
    now = datetime.now(UTC)
    started = time.perf_counter()
    try:
        for start in range(0, count, MAX_INSERT_MANY):
            batch = fill_jobs(tenant, start, min(MAX_INSERT_MANY, count - start), now)
            await store.insert_many(batch)
    finally:
        await store.close()
    took = time.perf_counter() - started
    print(f"scale: {count:,} finished jobs stored in {took:.0f}s ({count / took:,.0f}/s)")


def file_mb(stack: Stack) -> str:
    if stack.distributed:
        return "n/a (MongoDB)"
    db = stack.workdir / "bench.db"
    sizes = [Path(f"{db}{suffix}") for suffix in ("", "-wal")]
    main, wal = (p.stat().st_size / 1e6 if p.exists() else 0.0 for p in sizes)
    return f"{main:.1f} MB (+ WAL {wal:.1f} MB)"


def file_bytes(stack: Stack) -> int:
    db = stack.workdir / "bench.db"
    return 0 if stack.distributed or not db.exists() else db.stat().st_size
