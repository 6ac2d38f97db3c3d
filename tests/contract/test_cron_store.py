"""Cron templates on every store: their schedule settings round-trip, and a template in
Europe/Paris crosses both DST changes of 2026 through the scheduler with one run per fire
time (SQLite always; MongoDB in the integration run). Time is a ManualClock moved to each
fire time, so nothing waits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest

from jobscheduler.clock import ManualClock
from jobscheduler.domain import states
from jobscheduler.domain.cron import CatchUp, CronPolicy, DstFold, DstGap
from jobscheduler.domain.model import Job, utc
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore

from .store_support import make_job, scheduler_deps

PARIS = CronPolicy(
    timezone="Europe/Paris",
    dst_gap=DstGap.SHIFT,
    dst_fold=DstFold.BOTH,
    catch_up=CatchUp.ALL,
    catch_up_window=timedelta(minutes=90),
    jitter=timedelta(seconds=90),
)


def paris_template(key: str, expression: str, first: datetime, policy: CronPolicy) -> Job:
    return attrs.evolve(
        make_job(key=key, cron=expression, scheduled_at=first, created_at=first),
        cron_policy=policy,
    )


async def test_template_schedule_settings_round_trip_and_one_offs_have_none(
    store: JobStore,
) -> None:
    first = datetime(2026, 3, 28, 1, 30, tzinfo=UTC)
    template = await store.insert(paris_template("paris", "30 2 * * *", first, PARIS))
    legacy = await store.insert(make_job(key="legacy", cron="0 * * * *", scheduled_at=first))
    one_off = await store.insert(make_job(key="one-off"))
    assert (await store.get(template.id)).cron_policy == PARIS
    assert (await store.get(legacy.id)).cron_policy is None
    assert (await store.get(one_off.id)).cron_policy is None
    [due_paris, due_legacy] = await store.due_templates(first, 10)
    assert due_paris == template
    assert due_legacy == legacy
    listed = {j.id: j.cron_policy for j in await store.list_jobs("tenant-a", None, 10)}
    assert listed == {template.id: PARIS, legacy.id: None, one_off.id: None}
    # A transition keeps the settings (they are not part of any Change).
    moved = await store.apply(
        states.advance_template(template, next_at=first + timedelta(days=1), now=first)
    )
    assert moved is not None
    assert moved.cron_policy == PARIS


async def _fire_until(deps: Deps, clock: ManualClock, template: Job, until: datetime) -> None:
    scheduler = Scheduler(deps)
    while (due := (await deps.store.get(template.id)).scheduled_at) <= until:
        clock.advance((due - clock.now()).total_seconds() + 1)
        await scheduler.tick()


async def _runs(store: JobStore, template: Job) -> list[Job]:
    prefix = f"{template.idempotency_key}-run-"
    jobs = [
        j
        for j in await store.list_jobs("tenant-a", None, 100)
        if j.idempotency_key.startswith(prefix)
    ]
    return sorted(jobs, key=lambda j: int(j.idempotency_key.rsplit("-", 1)[1]))


def _z(*texts: str) -> list[datetime]:
    return [utc(datetime.fromisoformat(t).replace(tzinfo=UTC)) for t in texts]


@pytest.mark.parametrize(
    ("start", "until", "expected"),
    [
        # Spring forward: 02:30 on 03-29 does not exist -> 03:00 CEST (01:00Z).
        (
            "2026-03-27T12:00",
            "2026-03-30T12:00",
            ["2026-03-28T01:30", "2026-03-29T01:00", "2026-03-30T00:30"],
        ),
        # Fall back: 02:30 on 10-25 happens twice -> both under dstFold "both".
        (
            "2026-10-24T12:00",
            "2026-10-26T12:00",
            ["2026-10-25T00:30", "2026-10-25T01:30", "2026-10-26T01:30"],
        ),
    ],
)
async def test_paris_template_crosses_a_dst_change_with_one_run_per_fire_time(
    store: JobStore, tmp_path: Path, start: str, until: str, expected: list[str]
) -> None:
    [begin] = _z(start)
    clock = ManualClock(begin)
    first = PARIS.next_fire("30 2 * * *", begin)
    template = await store.insert(paris_template("paris-dst", "30 2 * * *", first, PARIS))

    await _fire_until(
        scheduler_deps(store, clock, tmp_path, "cron-test"), clock, template, _z(until)[0]
    )

    runs = await _runs(store, template)
    fires = _z(*expected)
    assert [r.idempotency_key for r in runs] == [states.instance_key(template, f) for f in fires]
    for run, fire in zip(runs, fires, strict=True):
        assert fire <= run.scheduled_at < fire + PARIS.jitter  # jittered, keyed on the fire
