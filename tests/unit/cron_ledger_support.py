"""Helpers of the cron ledger tests: read a template's ledger oldest first, sum its records
up as (fire time, status, reason), complete a run, and tick the scheduler at a virtual time."""

from __future__ import annotations

from datetime import datetime

import trio

from jobscheduler.domain.cron import Occurrence
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import Change
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore
from jobscheduler.store.jobs import OccurrenceQuery


async def ledger(store: JobStore, tmpl: Job) -> list[Occurrence]:
    """The template's ledger, oldest fire time first."""
    return (await store.occurrences(OccurrenceQuery(tmpl.id), limit=1000))[::-1]


def summary(records: list[Occurrence]) -> list[tuple[datetime, str, str | None]]:
    return [(r.fire_at, r.status.value, r.reason.value if r.reason else None) for r in records]


async def finish(store: JobStore, run: Job) -> None:
    """The run completes (as an executor would leave it)."""
    change = Change(
        transition="test_finish", job_id=run.id, expect={}, set={"status": Status.COMPLETED}
    )
    assert await store.apply(change) is not None


async def tick_at(scheduler: Scheduler, *seconds: float) -> None:
    """A scheduler tick at each of these virtual times, in order."""
    for at in seconds:
        await trio.sleep_until(at)
        await scheduler.tick()
