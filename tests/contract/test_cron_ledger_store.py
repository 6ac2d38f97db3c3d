"""The cron ledger on every store: records keyed by (template, fire time), first writer
wins, newest first with a fire-time cursor, retention pruning (SQLite always; MongoDB in
the integration run)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import trio

from jobscheduler.clock import ManualClock
from jobscheduler.domain.cron import CronPolicy, Occurrence, OccurrenceStatus, Overlap, SkipReason
from jobscheduler.domain.model import Status, new_job_id
from jobscheduler.domain.states import Change
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore
from jobscheduler.store.jobs import OccurrenceQuery

from .store_support import make_job, scheduler_deps
from .test_cron_store import _runs

T0 = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)
TEMPLATE = "6650f0a1b2c3d4e5f6a7b8c9"


def recorded(
    minute: int, status: OccurrenceStatus, *, template: str, late: float, **fields: Any
) -> Occurrence:
    """The record of ``template``'s fire time ``minute`` minutes after T0, written ``late``
    seconds after it."""
    fire_at = T0 + timedelta(minutes=minute)
    return Occurrence(
        template_id=template,
        tenant_id="tenant-a",
        fire_at=fire_at,
        status=status,
        recorded_at=fire_at + timedelta(seconds=late),
        **fields,
    )


def spawned(minute: int, *, template: str = TEMPLATE, late: float = 0.5) -> Occurrence:
    return recorded(
        minute, OccurrenceStatus.SPAWNED, template=template, late=late, run_id=new_job_id()
    )


def skipped(minute: int, reason: SkipReason = SkipReason.OVERLAP) -> Occurrence:
    return recorded(minute, OccurrenceStatus.SKIPPED, template=TEMPLATE, late=1, reason=reason)


async def test_records_round_trip_newest_fire_time_first(store: JobStore) -> None:
    replacing = attrs.evolve(spawned(3), cancelled_run_id=new_job_id())  # cancel_previous
    records = [spawned(0), skipped(1, SkipReason.DST_GAP), spawned(2, late=75.25), replacing]
    assert await store.record_occurrences(records) == [(r, True) for r in records]
    listed = await store.occurrences(OccurrenceQuery(TEMPLATE), limit=10)
    assert listed == records[::-1]
    assert listed[0].cancelled_run_id == replacing.cancelled_run_id
    assert listed[1].cancelled_run_id is None
    assert listed[1].lateness == timedelta(seconds=75.25)
    assert listed[2].lateness is None


async def test_a_recorded_fire_time_keeps_its_first_record(store: JobStore) -> None:
    first = spawned(5)
    assert await store.record_occurrences([first]) == [(first, True)]
    # A second scheduler decides differently for the same fire time: the first record
    # stands and is what the second one is told.
    again = await store.record_occurrences([skipped(5), skipped(6)])
    assert again == [(first, False), (skipped(6), True)]
    assert await store.occurrences(OccurrenceQuery(TEMPLATE), limit=10) == [skipped(6), first]
    # The very same record again (a repeated pass at the same instant) is not written again.
    assert await store.record_occurrences([skipped(6)]) == [(skipped(6), False)]
    # A key twice in one call: its first record is written.
    twice = [skipped(8, SkipReason.MISSED), skipped(8)]
    assert await store.record_occurrences(twice) == [(twice[0], True), (twice[0], False)]


async def test_concurrent_writers_of_one_fire_time_are_told_the_same_record(
    store: JobStore,
) -> None:
    answers: list[tuple[Occurrence, bool]] = []

    async def write(record: Occurrence) -> None:
        answers.extend(await store.record_occurrences([record]))

    async with trio.open_nursery() as nursery:
        for record in (spawned(7), spawned(7), skipped(7)):
            nursery.start_soon(write, record)
    assert len(answers) == 3
    assert answers[0][0] == answers[1][0] == answers[2][0]
    assert sorted(written for _, written in answers) == [False, False, True]
    assert await store.occurrences(OccurrenceQuery(TEMPLATE), limit=10) == [answers[0][0]]


async def test_cursor_status_filter_and_templates_apart(store: JobStore) -> None:
    await store.record_occurrences(
        [spawned(m) if m % 2 else skipped(m) for m in range(10)] + [spawned(3, template="b" * 24)]
    )
    page = await store.occurrences(OccurrenceQuery(TEMPLATE), limit=4)
    assert [o.fire_at for o in page] == [T0 + timedelta(minutes=m) for m in (9, 8, 7, 6)]
    following = await store.occurrences(OccurrenceQuery(TEMPLATE, before=page[-1].fire_at), limit=4)
    assert [o.fire_at for o in following] == [T0 + timedelta(minutes=m) for m in (5, 4, 3, 2)]
    latest_run = await store.occurrences(
        OccurrenceQuery(TEMPLATE, statuses=[OccurrenceStatus.SPAWNED, OccurrenceStatus.BUFFERED]),
        limit=1,
    )
    assert [o.fire_at for o in latest_run] == [T0 + timedelta(minutes=9)]
    assert len(await store.occurrences(OccurrenceQuery("b" * 24), limit=10)) == 1
    assert await store.occurrences(OccurrenceQuery("c" * 24), limit=10) == []


async def test_prune_deletes_records_written_before_the_cutoff(store: JobStore) -> None:
    await store.record_occurrences([spawned(m) for m in range(6)])
    assert await store.prune_occurrences(T0 + timedelta(minutes=3)) == 3
    left = await store.occurrences(OccurrenceQuery(TEMPLATE), limit=10)
    assert [o.fire_at for o in left] == [T0 + timedelta(minutes=m) for m in (5, 4, 3)]
    assert await store.prune_occurrences(T0) == 0


# ------------------------------------------------------------------ through the scheduler


async def test_buffer_one_through_the_scheduler_records_and_releases_on_every_store(
    store: JobStore, tmp_path: Path
) -> None:
    """A 5-minute template whose first run stays unfinished: 00:05 is held (on the
    template and in the ledger), 00:10 skipped; once the run completes, the held fire time
    is spawned with the ledger's run id and the template holds nothing."""
    clock = ManualClock(T0)
    deps = scheduler_deps(store, clock, tmp_path, "cron-test")
    scheduler = Scheduler(deps)
    template = await store.insert(
        attrs.evolve(
            make_job(key="buffered", cron="*/5 * * * *", scheduled_at=T0, created_at=T0),
            cron_policy=CronPolicy(overlap=Overlap.BUFFER_ONE),
        )
    )
    for minute in (0, 5, 10):
        clock.advance((T0 + timedelta(minutes=minute, seconds=1) - clock.now()).total_seconds())
        await scheduler.tick()
    assert (await store.get(template.id)).cron_buffered == T0 + timedelta(minutes=5)
    assert [j.id for j in await store.buffered_templates(10)] == [template.id]
    [first] = await _runs(store, template)
    finished = Change(
        transition="test_finish", job_id=first.id, expect={}, set={"status": Status.COMPLETED}
    )
    assert await store.apply(finished) is not None

    clock.advance(60)
    await scheduler.tick()

    records = (await store.occurrences(OccurrenceQuery(template.id), limit=10))[::-1]
    assert [(r.status.value, r.reason) for r in records] == [
        ("spawned", None),
        ("buffered", None),
        ("skipped", SkipReason.OVERLAP),
    ]
    runs = await _runs(store, template)
    assert [r.id for r in runs] == [records[0].run_id, records[1].run_id]
    assert (await store.get(template.id)).cron_buffered is None
    assert await store.buffered_templates(10) == []
