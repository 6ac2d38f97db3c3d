"""The ledger of every fire time and the overlap policies, driven by the scheduler on the
memory store in virtual time (``autojump_clock``: time moves only when a test sleeps)."""

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
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import Change
from jobscheduler.errors import ValidationError
from jobscheduler.roles.reaper.sweeps import Reaper
from jobscheduler.roles.scheduler.cron_firing import TemplateFiring, record_paused
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore

from .conftest import BASE, DepsFactory, after, make_job, make_settings, sample
from .roles_support import Barrier, SplitBrainStore
from .test_cron_scheduler import EVERY_5, keys, runs_of, template

SPAWNED = OccurrenceStatus.SPAWNED


async def ledger(store: JobStore, tmpl: Job) -> list[Occurrence]:
    """The template's ledger, oldest fire time first."""
    return (await store.occurrences(tmpl.id, limit=1000))[::-1]


def summary(records: list[Occurrence]) -> list[tuple[datetime, str, str | None]]:
    return [(r.fire_at, r.status.value, r.reason.value if r.reason else None) for r in records]


async def finish(store: JobStore, run: Job) -> None:
    """The run completes (as an executor would leave it)."""
    change = Change(
        transition="test_finish", job_id=run.id, expect={}, set={"status": Status.COMPLETED}
    )
    assert await store.apply(change) is not None


async def tick_at(scheduler: Scheduler, seconds: float) -> None:
    await trio.sleep_until(seconds)
    await scheduler.tick()


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


# ------------------------------------------------------------------------- overlap


async def test_overlap_allow_spawns_while_the_previous_run_is_unfinished(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    scheduler = Scheduler(make_deps())
    tmpl = template("allow", EVERY_5, BASE, overlap=Overlap.ALLOW)
    await store.insert(tmpl)
    for fire in (0, 300, 600):
        await tick_at(scheduler, fire + 1)
    runs = await runs_of(store, tmpl)
    assert [r.idempotency_key for r in runs] == keys(tmpl, BASE, after(300), after(600))
    assert {r.status for r in runs} == {Status.QUEUED}  # none has finished


async def test_overlap_skip_skips_fire_times_until_the_previous_run_finishes(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    scheduler = Scheduler(deps)
    tmpl = template("skip", EVERY_5, BASE, overlap=Overlap.SKIP)
    await store.insert(tmpl)
    await tick_at(scheduler, 1)
    await tick_at(scheduler, 301)
    await tick_at(scheduler, 601)
    [first] = await runs_of(store, tmpl)
    await finish(store, first)
    await tick_at(scheduler, 901)

    assert summary(await ledger(store, tmpl)) == [
        (BASE, "spawned", None),
        (after(300), "skipped", "overlap"),
        (after(600), "skipped", "overlap"),
        (after(900), "spawned", None),
    ]
    assert [r.idempotency_key for r in await runs_of(store, tmpl)] == keys(tmpl, BASE, after(900))
    assert sample(deps.metrics, "scheduler_cron_skipped_total", {"reason": "overlap"}) == 2


async def test_overlap_buffer_one_holds_one_fire_time_and_runs_it_when_the_previous_ends(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    scheduler = Scheduler(deps)
    tmpl = template("buffer", EVERY_5, BASE, overlap=Overlap.BUFFER_ONE)
    await store.insert(tmpl)
    await tick_at(scheduler, 1)
    await tick_at(scheduler, 301)  # held
    await tick_at(scheduler, 601)  # skipped: one is already held
    [first] = await runs_of(store, tmpl)
    assert (await store.get(tmpl.id)).cron_buffered == after(300)
    await tick_at(scheduler, 700)
    assert len(await runs_of(store, tmpl)) == 1  # the first run has not finished

    await finish(store, first)
    await tick_at(scheduler, 720)

    records = await ledger(store, tmpl)
    assert summary(records) == [
        (BASE, "spawned", None),
        (after(300), "buffered", None),
        (after(600), "skipped", "overlap"),
    ]
    runs = await runs_of(store, tmpl)
    assert [r.idempotency_key for r in runs] == keys(tmpl, BASE, after(300))
    assert runs[1].id == records[1].run_id
    assert (await store.get(tmpl.id)).cron_buffered is None
    # Spawned 420 s after its fire time.
    assert sample(deps.metrics, "scheduler_cron_lag_seconds_sum") == 1 + 420

    # The buffered run is now the previous run: the next fire time is held behind it.
    await tick_at(scheduler, 901)
    assert (await store.get(tmpl.id)).cron_buffered == after(900)
    await finish(store, runs[1])
    await tick_at(scheduler, 1000)
    assert [r.idempotency_key for r in await runs_of(store, tmpl)] == keys(
        tmpl, BASE, after(300), after(900)
    )


@pytest.mark.parametrize("overlap", [Overlap.SKIP, Overlap.BUFFER_ONE])
async def test_catch_up_all_under_an_overlap_policy_spawns_one_run_per_pass(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    overlap: Overlap,
) -> None:
    deps = make_deps()
    tmpl = template("all", EVERY_5, BASE, catch_up=CatchUp.ALL, overlap=overlap)
    await store.insert(tmpl)
    await trio.sleep(900 + 30)  # 00:00 .. 00:15 due at once
    await Scheduler(deps).tick()

    second = "buffered" if overlap is Overlap.BUFFER_ONE else "skipped"
    assert [r.status.value for r in await ledger(store, tmpl)] == [
        "spawned",
        second,
        "skipped",
        "skipped",
    ]
    assert len(await runs_of(store, tmpl)) == 1


@pytest.mark.parametrize("overlap", list(Overlap))
async def test_two_schedulers_at_once_record_each_fire_time_once_and_act_on_that_record(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    overlap: Overlap,
) -> None:
    # Two leaders for a moment: two schedulers, each with its own deps, on one store.
    tmpl = template(
        "split",
        EVERY_5,
        BASE,
        catch_up=CatchUp.ALL,
        overlap=overlap,
        catch_up_window=timedelta(minutes=30),
    )
    await store.insert(tmpl)
    for fire in (1830, 2130):  # a backlog (00:05 .. 00:30), then one on-time fire time
        await trio.sleep_until(fire)
        barrier = Barrier(2)
        first, second = (
            Scheduler(
                make_deps(store=SplitBrainStore(store, barrier), clock=TrioClock(base=after(fire)))
            )
            for _ in range(2)
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first.tick)
            nursery.start_soon(second.tick)

    records = await ledger(store, tmpl)
    assert [r.fire_at for r in records] == [after(s) for s in range(0, 2101, 300)]
    runs = await runs_of(store, tmpl)
    named = {r.run_id for r in records if r.run_id is not None}
    assert {r.id for r in runs} <= named  # every run is the one its record names
    assert len({r.idempotency_key for r in runs}) == len(runs)
    spawned = [r for r in records if r.status is SPAWNED]
    assert len(runs) == len(spawned)


def test_every_overlap_policy_is_accepted_at_create_and_an_unknown_one_is_400() -> None:
    for overlap in Overlap:
        assert cron.parse_policy({"overlap": overlap.value}, EVERY_5).overlap is overlap
    with pytest.raises(ValidationError, match="overlap: must be one of"):
        cron.parse_policy({"overlap": "queue"}, EVERY_5)


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
    for fire in range(0, 7201, 300):
        await tick_at(scheduler, fire + 1)
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
