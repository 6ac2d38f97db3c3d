"""The ledger of every fire time, driven by the scheduler on the memory store in virtual time
(``autojump_clock``: time moves only when a test sleeps): why a fire time got a run or none,
pruning past the retention, stale snapshots, DST gaps and pauses. The overlap policies are
in test_cron_overlap.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from jobscheduler.clock import TrioClock
from jobscheduler.domain import cron
from jobscheduler.domain.cron import CatchUp, Occurrence, OccurrenceStatus, Overlap
from jobscheduler.domain.cron import SkipReason as Why
from jobscheduler.roles.reaper.sweeps import Reaper
from jobscheduler.roles.scheduler.cron_firing import TemplateFiring, record_paused
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore

from .conftest import BASE, DepsFactory, after, make_job, make_settings, sample
from .cron_ledger_support import ledger, summary, tick_at
from .test_cron_scheduler import EVERY_5, runs_of, template

# ------------------------------------------------------------------------- reasons


async def test_on_time_fire_times_are_spawned_with_their_run_id_and_lateness(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    scheduler = Scheduler(deps)
    tmpl = template("on-time", EVERY_5, BASE)
    await store.insert(tmpl)
    await tick_at(scheduler, 2)
    await tick_at(scheduler, 300 + 7)

    records = await ledger(store, tmpl)
    runs = await runs_of(store, tmpl)
    assert summary(records) == [(BASE, "spawned", None), (after(300), "spawned", None)]
    assert [r.run_id for r in records] == [r.id for r in runs]
    assert [r.lateness for r in records] == [timedelta(seconds=2), timedelta(seconds=7)]
    lag_count = sample(deps.metrics, "scheduler_cron_lag_seconds_count")
    lag_sum = sample(deps.metrics, "scheduler_cron_lag_seconds_sum")
    assert (lag_count, lag_sum) == (2, 9)


@pytest.mark.parametrize(
    ("catch_up", "reason", "spawned"),
    [
        # Down from 00:00 to 01:02: 00:00 .. 01:00 are due.
        (CatchUp.NONE, Why.MISSED, []),
        (CatchUp.ONE, Why.COALESCED, [0]),
        # The window is 30 min: 00:35 .. 01:00 run, 00:32 being the oldest time inside it.
        (CatchUp.ALL, Why.OUTSIDE_CATCH_UP_WINDOW, list(range(2100, 3601, 300))),
    ],
)
async def test_each_catch_up_policy_records_why_a_missed_fire_time_got_no_run(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    catch_up: CatchUp,
    reason: Why,
    spawned: list[int],
) -> None:
    deps = make_deps()
    tmpl = template(
        f"down-{catch_up}",
        EVERY_5,
        BASE,
        catch_up=catch_up,
        catch_up_window=timedelta(minutes=30),
    )
    await store.insert(tmpl)
    await trio.sleep(3600 + 120)
    await Scheduler(deps).tick()

    expected = [
        (after(s), "spawned", None) if s in spawned else (after(s), "skipped", reason.value)
        for s in range(0, 3601, 300)
    ]
    assert summary(await ledger(store, tmpl)) == expected
    skipped = len(expected) - len(spawned)
    assert sample(deps.metrics, "scheduler_cron_skipped_total", {"reason": reason}) == skipped
    assert len(await runs_of(store, tmpl)) == len(spawned)


async def test_a_wall_time_in_a_dst_gap_under_skip_is_recorded_at_the_end_of_the_gap(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    start = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
    policy = cron.parse_policy({"timezone": "Europe/Paris", "dstGap": "skip"}, "30 2 * * *")
    first = policy.next_fire("30 2 * * *", start)
    tmpl = attrs.evolve(
        make_job(key="gap", cron="30 2 * * *", scheduled_at=first), cron_policy=policy
    )
    await store.insert(tmpl)
    deps = make_deps(clock=TrioClock(base=start))
    scheduler = Scheduler(deps)
    while (due := (await store.get(tmpl.id)).scheduled_at) < datetime(2026, 3, 31, tzinfo=UTC):
        await deps.clock.sleep_until(due)
        await scheduler.tick()

    # 02:30 on 2026-03-29 does not exist: recorded at 03:00 CEST (01:00Z), no run.
    assert summary(await ledger(store, tmpl)) == [
        (datetime(2026, 3, 28, 1, 30, tzinfo=UTC), "spawned", None),
        (datetime(2026, 3, 29, 1, 0, tzinfo=UTC), "skipped", "dst_gap"),
        (datetime(2026, 3, 30, 0, 30, tzinfo=UTC), "spawned", None),
    ]
    assert sample(deps.metrics, "scheduler_cron_skipped_total", {"reason": "dst_gap"}) == 1


async def test_the_reaper_prunes_ledger_records_past_the_retention(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    deps = make_deps(settings=make_settings(tmp_path, cron_ledger_retention=3600.0))
    scheduler = Scheduler(deps)
    tmpl = template("retention", EVERY_5, BASE)
    await store.insert(tmpl)
    await tick_at(scheduler, *(fire + 1 for fire in range(0, 7201, 300)))
    assert len(await ledger(store, tmpl)) == 25

    await Reaper(deps).sweep()  # at 02:00:01: records written before 01:00:01 go

    assert [r.fire_at for r in await ledger(store, tmpl)] == [
        after(s) for s in range(3600, 7201, 300)
    ]


async def test_a_stale_snapshot_never_overwrites_a_held_fire_time_another_scheduler_chose(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    firing = TemplateFiring(deps)
    tmpl = template("stale", EVERY_5, after(300), overlap=Overlap.BUFFER_ONE)
    await store.insert(tmpl)
    # Another scheduler released the fire time held at 00:00 and then held 00:05.
    running = await store.insert(make_job(key="running"))
    await store.record_occurrences(
        [
            Occurrence(
                template_id=tmpl.id,
                tenant_id=tmpl.tenant_id,
                fire_at=BASE,
                status=OccurrenceStatus.BUFFERED,
                recorded_at=BASE,
                run_id=running.id,
            ),
            Occurrence(
                template_id=tmpl.id,
                tenant_id=tmpl.tenant_id,
                fire_at=after(300),
                status=OccurrenceStatus.BUFFERED,
                recorded_at=after(300),
                run_id="0" * 24,
            ),
        ]
    )
    await trio.sleep(301)

    await firing.fire(attrs.evolve(tmpl, cron_buffered=BASE))  # still shows 00:00 held
    assert (await store.get(tmpl.id)).scheduled_at == after(300)  # not advanced

    await firing.fire(await store.get(tmpl.id))
    stored = await store.get(tmpl.id)
    assert (stored.scheduled_at, stored.cron_buffered) == (after(600), after(300))


@pytest.mark.parametrize(
    ("zone", "expression", "gaps"),
    [
        ("Europe/Paris", "30 2 * * *", 2),
        ("Europe/Paris", "*/30 2 * * *", 2),
        # 02:00 and 02:30 would land on 03:00, itself a fire time: nothing is skipped.
        ("Europe/Paris", "*/30 1-3 * * *", 0),
        ("America/New_York", "15 2 * * *", 2),
        ("Australia/Lord_Howe", "5 2 * * *", 2),
        ("Australia/Lord_Howe", "*/15 1-3 * * *", 0),
        ("America/Santiago", "0 0 * * *", 2),
    ],
)
def test_gap_skips_only_add_skipped_fires_to_the_walk(
    zone: str, expression: str, gaps: int
) -> None:
    """With ``gap_skips`` the walk yields the same fire times plus, marked ``skipped``, one
    per DST gap instant (two in 2026-2027) the template has no fire time at; without it
    nothing changes."""
    policy = cron.CronPolicy(timezone=zone, dst_gap=cron.DstGap.SKIP)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = datetime(2028, 1, 1, tzinfo=UTC)

    def walk(gap_skips: bool) -> list[cron.Fire]:
        out = []
        for fire in policy.fires(expression, start, gap_skips=gap_skips):
            if fire.at >= end:
                return out
            out.append(fire)
        return out

    plain, with_skips = walk(False), walk(True)
    assert [f for f in with_skips if not f.skipped] == plain
    skipped = [f for f in with_skips if f.skipped]
    assert len(skipped) == gaps
    assert {f.at for f in skipped}.isdisjoint({f.at for f in plain})
    tz = cron.zone(zone)
    for fire in skipped:  # the wall time it stood for does not exist
        assert (
            fire.wall.replace(tzinfo=tz).astimezone(UTC).astimezone(tz).replace(tzinfo=None)
            != fire.wall
        )


async def test_fire_times_passed_over_while_paused_are_recorded_once_as_paused(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    tmpl = template("paused", EVERY_5, BASE)
    await store.insert(tmpl)
    await trio.sleep(1000)  # paused from 00:00 (its fire time then) until 00:16:40

    assert await record_paused(deps, tmpl, until=after(1200)) == 4
    assert await record_paused(deps, tmpl, until=after(1200)) == 0  # a repeated resume

    assert summary(await ledger(store, tmpl)) == [
        (after(s), "skipped", "paused") for s in (0, 300, 600, 900)
    ]
    assert sample(deps.metrics, "scheduler_cron_skipped_total", {"reason": "paused"}) == 4
