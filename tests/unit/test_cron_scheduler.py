"""The scheduler firing cron templates under their zone, DST, catch-up and jitter settings,
on the memory store, in virtual time (``autojump_clock``: time moves only when a test
sleeps). Every spawned run is keyed on its fire time; these tests read the keys back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest
import trio
import trio.testing

from jobscheduler.clock import TrioClock
from jobscheduler.domain import cron, states
from jobscheduler.domain.cron import CatchUp, CronPolicy, DstFold
from jobscheduler.domain.model import Job
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore

from .conftest import BASE, DepsFactory, after, make_job, sample
from .cron_ledger_support import tick_at
from .roles_support import Barrier, SplitBrainStore

EVERY_5 = "*/5 * * * *"


def template(key: str, expression: str, at: datetime, **policy: object) -> Job:
    return attrs.evolve(
        make_job(key=key, cron=expression, scheduled_at=at),
        cron_policy=CronPolicy(**policy),  # type: ignore[arg-type]
    )


async def runs_of(store: JobStore, tmpl: Job) -> list[Job]:
    """The template's spawned runs, oldest fire time first."""
    jobs = await store.list_jobs(tmpl.tenant_id, None, 1000)
    runs = [j for j in jobs if j.idempotency_key.startswith(f"{tmpl.idempotency_key}-run-")]
    return sorted(runs, key=lambda j: int(j.idempotency_key.rsplit("-", 1)[1]))


def keys(tmpl: Job, *fire_times: datetime) -> list[str]:
    return [states.instance_key(tmpl, f) for f in fire_times]


async def test_catch_up_none_skips_the_fire_times_missed_during_downtime(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()  # its clock reads BASE now
    tmpl = template("none", EVERY_5, BASE, catch_up=CatchUp.NONE)
    await store.insert(tmpl)
    await trio.sleep(3600 + 120)  # down for an hour: 13 fire times missed

    await Scheduler(deps).tick()

    assert await runs_of(store, tmpl) == []
    assert (await store.get(tmpl.id)).scheduled_at == after(3600 + 300)


async def test_catch_up_none_runs_fire_times_reached_on_time(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    scheduler = Scheduler(make_deps())
    tmpl = template("none-on-time", EVERY_5, BASE, catch_up=CatchUp.NONE)
    await store.insert(tmpl)
    await tick_at(scheduler, 1, 301, 601)
    assert [r.idempotency_key for r in await runs_of(store, tmpl)] == keys(
        tmpl, after(0), after(300), after(600)
    )


async def test_catch_up_one_spawns_one_run_for_all_missed_fire_times(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    tmpl = template("one", EVERY_5, BASE, catch_up=CatchUp.ONE)
    await store.insert(tmpl)
    await trio.sleep(3600 + 60)

    await Scheduler(deps).tick()

    assert [r.idempotency_key for r in await runs_of(store, tmpl)] == keys(tmpl, BASE)
    assert (await store.get(tmpl.id)).scheduled_at == after(3600 + 300)


async def test_catch_up_all_spawns_one_run_per_fire_time_in_the_window_oldest_first(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    tmpl = template(
        "all", EVERY_5, BASE, catch_up=CatchUp.ALL, catch_up_window=timedelta(minutes=30)
    )
    await store.insert(tmpl)
    await trio.sleep(3600 + 60)

    await Scheduler(deps).tick()

    runs = await runs_of(store, tmpl)
    fires = [after(s) for s in range(2100, 3601, 300)]  # 00:35 .. 01:00; older ones skipped
    assert [r.idempotency_key for r in runs] == keys(tmpl, *fires)
    assert [r.scheduled_at for r in runs] == fires
    assert (await store.get(tmpl.id)).scheduled_at == after(3900)


async def test_catch_up_all_is_capped_per_pass_and_finishes_on_later_passes(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    tmpl = template(
        "all-cap", "* * * * *", BASE, catch_up=CatchUp.ALL, catch_up_window=timedelta(hours=4)
    )
    await store.insert(tmpl)
    await trio.sleep(3 * 3600)  # 181 fire times due, 00:00 .. 03:00
    scheduler = Scheduler(deps)

    await scheduler.tick()
    assert len(await runs_of(store, tmpl)) == cron.MAX_SPAWNS_PER_PASS
    assert (await store.get(tmpl.id)).scheduled_at == after(60 * cron.MAX_SPAWNS_PER_PASS)

    await scheduler.tick()
    runs = await runs_of(store, tmpl)
    assert [r.idempotency_key for r in runs] == keys(tmpl, *(after(60 * i) for i in range(181)))
    assert (await store.get(tmpl.id)).scheduled_at == after(3 * 3600 + 60)


async def test_jitter_delays_the_run_but_keys_it_on_the_fire_time(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    jitter = timedelta(minutes=4)
    templates = [template(f"jit-{i}", EVERY_5, BASE, jitter=jitter) for i in range(10)]
    for tmpl in templates:
        await store.insert(tmpl)
    await trio.sleep(1)

    await Scheduler(deps).tick()

    offsets = set()
    for tmpl in templates:
        (run,) = await runs_of(store, tmpl)
        assert run.idempotency_key == states.instance_key(tmpl, BASE)
        offset = run.scheduled_at - BASE
        assert offset == cron.jitter_offset(tmpl.id, BASE, jitter)
        assert timedelta(0) <= offset < jitter
        offsets.add(offset)
    assert len(offsets) > 1  # the templates' runs are spread, not all at 00:00


@pytest.mark.parametrize("catch_up", list(CatchUp))
async def test_two_schedulers_at_once_spawn_each_fire_time_once_under_every_policy(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    catch_up: CatchUp,
) -> None:
    # Two leaders for a moment: two schedulers, each with its own deps, on one store.
    barrier = Barrier(2)
    first = make_deps(store=SplitBrainStore(store, barrier))
    second = make_deps(store=SplitBrainStore(store, barrier))
    tmpl = template(
        "split", EVERY_5, BASE, catch_up=catch_up, catch_up_window=timedelta(minutes=30)
    )
    await store.insert(tmpl)
    await trio.sleep(1800 + 30)  # 00:00 .. 00:30 due; 00:30 is on time
    async with trio.open_nursery() as nursery:
        nursery.start_soon(Scheduler(first).tick)
        nursery.start_soon(Scheduler(second).tick)

    expected = {
        CatchUp.NONE: [after(1800)],
        CatchUp.ONE: [BASE],
        CatchUp.ALL: [after(s) for s in range(300, 1801, 300)],  # 00:00 is outside the window
    }[catch_up]
    assert [r.idempotency_key for r in await runs_of(store, tmpl)] == keys(tmpl, *expected)
    spawned = sum(
        sample(d.metrics, "scheduler_cron_instances_spawned_total") for d in (first, second)
    )
    assert spawned == len(expected)
    assert (await store.get(tmpl.id)).scheduled_at == after(2100)


# ----------------------------------------------------------------------------- DST


async def fire_on_time(
    make_deps: DepsFactory, store: JobStore, start: datetime, until: datetime, *t: Job
) -> None:
    """Run the scheduler at each fire time of the templates ``t`` from ``start`` (the wall
    time at this moment) until ``until``."""
    deps = make_deps(clock=TrioClock(base=start))
    scheduler = Scheduler(deps)
    while True:
        due = min([(await store.get(tmpl.id)).scheduled_at for tmpl in t])
        if due > until:
            return
        await deps.clock.sleep_until(due)
        await scheduler.tick()


def utc_times(*texts: str) -> list[datetime]:
    return [datetime.fromisoformat(t).replace(tzinfo=UTC) for t in texts]


@pytest.mark.parametrize(
    ("gap", "expected"),
    [
        # 02:30 does not exist on 2026-03-29: 03:00 CEST (01:00Z) under "shift", nothing
        # that day under "skip".
        ("shift", ["2026-03-28T01:30", "2026-03-29T01:00", "2026-03-30T00:30"]),
        ("skip", ["2026-03-28T01:30", "2026-03-30T00:30"]),
    ],
)
async def test_paris_template_crosses_spring_forward_under_its_gap_policy(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    gap: str,
    expected: list[str],
) -> None:
    start = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
    policy = cron.parse_policy({"timezone": "Europe/Paris", "dstGap": gap}, "30 2 * * *")
    first = policy.next_fire("30 2 * * *", start)
    tmpl = attrs.evolve(
        make_job(key=f"paris-{gap}", cron="30 2 * * *", scheduled_at=first), cron_policy=policy
    )
    await store.insert(tmpl)

    await fire_on_time(make_deps, store, start, datetime(2026, 3, 30, 12, tzinfo=UTC), tmpl)

    runs = await runs_of(store, tmpl)
    assert [r.idempotency_key for r in runs] == keys(tmpl, *utc_times(*expected))
    assert (await store.get(tmpl.id)).cron_policy == policy


async def test_paris_template_crosses_fall_back_once_or_twice_by_its_fold_policy(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    start = datetime(2026, 10, 24, 12, 0, tzinfo=UTC)
    made = []
    for fold in DstFold:
        at = CronPolicy(timezone="Europe/Paris", dst_fold=fold).next_fire("30 2 * * *", start)
        made.append(
            template(f"fold-{fold}", "30 2 * * *", at, timezone="Europe/Paris", dst_fold=fold)
        )
    for tmpl in made:
        await store.insert(tmpl)

    await fire_on_time(make_deps, store, start, datetime(2026, 10, 26, 12, tzinfo=UTC), *made)

    first, both = made
    # 02:30 CEST (00:30Z) and, only under "both", 02:30 CET (01:30Z); then 02:30 CET daily.
    assert [r.idempotency_key for r in await runs_of(store, first)] == keys(
        first, *utc_times("2026-10-25T00:30", "2026-10-26T01:30")
    )
    assert [r.idempotency_key for r in await runs_of(store, both)] == keys(
        both, *utc_times("2026-10-25T00:30", "2026-10-25T01:30", "2026-10-26T01:30")
    )
