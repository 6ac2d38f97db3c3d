"""The cron overlap policies, driven by the scheduler on the memory store in virtual time
(``autojump_clock``): ``allow``, ``skip`` and ``buffer_one`` while a previous run is
unfinished, catch-up under an overlap policy, two schedulers at once, and the policies
accepted at create."""

from __future__ import annotations

from datetime import timedelta

import pytest
import trio
import trio.testing

from jobscheduler.clock import TrioClock
from jobscheduler.domain import cron
from jobscheduler.domain.cron import CatchUp, OccurrenceStatus, Overlap
from jobscheduler.domain.model import Job, Status
from jobscheduler.errors import ValidationError
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore

from .conftest import BASE, DepsFactory, after, sample
from .cron_ledger_support import finish, ledger, summary, tick_at
from .roles_support import Barrier, SplitBrainStore
from .test_cron_scheduler import EVERY_5, keys, runs_of, template

SPAWNED = OccurrenceStatus.SPAWNED


# ------------------------------------------------------------------------- overlap


async def past_three_fire_times(
    deps: Deps, store: JobStore, overlap: Overlap
) -> tuple[Scheduler, Job]:
    """A five-minute template under ``overlap``, and a scheduler on ``deps`` that ticked just
    after each of its first three fire times (00:00, 00:05, 00:10); no run has finished."""
    scheduler = Scheduler(deps)
    tmpl = template(overlap.value, EVERY_5, BASE, overlap=overlap)
    await store.insert(tmpl)
    await tick_at(scheduler, 1, 301, 601)
    return scheduler, tmpl


async def test_overlap_allow_spawns_while_the_previous_run_is_unfinished(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    _, tmpl = await past_three_fire_times(make_deps(), store, Overlap.ALLOW)
    runs = await runs_of(store, tmpl)
    assert [r.idempotency_key for r in runs] == keys(tmpl, BASE, after(300), after(600))
    assert {r.status for r in runs} == {Status.QUEUED}  # none has finished


async def test_overlap_skip_skips_fire_times_until_the_previous_run_finishes(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    scheduler, tmpl = await past_three_fire_times(deps, store, Overlap.SKIP)
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
    # The fire time at 300 is held, the one at 600 skipped: one is already held.
    scheduler, tmpl = await past_three_fire_times(deps, store, Overlap.BUFFER_ONE)
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
