"""Leadership: the scheduler dispatches only while it leads, and ``lead`` resigns when its
work fails (see ``roles_support`` for the clocks).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from jobscheduler.domain.model import Status
from jobscheduler.election import Term, lead
from jobscheduler.errors import StoreError
from jobscheduler.roles.scheduler.loop import run_scheduler
from jobscheduler.store import JobStore

from .conftest import DepsFactory, make_job, make_settings, sample
from .roles_support import LOOP_BOUND, ControlledElector, ObservedBus, status_of


async def test_scheduler_is_leader_gauge_is_one_while_leading_and_zero_after(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory
) -> None:
    deps = make_deps()
    async with trio.open_nursery() as nursery:
        await nursery.start(run_scheduler, deps)
        await trio.testing.wait_all_tasks_blocked()
        assert sample(deps.metrics, "scheduler_is_leader") == 1
        nursery.cancel_scope.cancel()
    assert sample(deps.metrics, "scheduler_is_leader") == 0


async def test_losing_leadership_stops_dispatch_until_leadership_returns(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    elector = ControlledElector()
    bus = ObservedBus()
    deps = make_deps(
        elector=elector, bus=bus, settings=make_settings(tmp_path, scheduler_tick=10.0)
    )

    def leading() -> float:
        return sample(deps.metrics, "scheduler_is_leader")

    first, second = make_job(), make_job()
    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_scheduler, deps)
            await store.insert(first)
            await trio.sleep(30)
            assert leading() == 0
            assert bus.published == []  # a standby never dispatches

            elector.grant()
            await bus.wait_for(lambda: first.id in bus.published_ids())
            assert leading() == 1

            elector.revoke()
            await elector.wait_resigned(1)
            assert leading() == 0
            await store.insert(second)
            await trio.sleep(30)
            assert second.id not in bus.published_ids()
            assert await status_of(store, second) is Status.PENDING

            elector.grant()
            await bus.wait_for(lambda: second.id in bus.published_ids())
            assert leading() == 1
            nursery.cancel_scope.cancel()
    assert leading() == 0
    assert elector.resigned == [1, 2]
    assert bus.published_ids() == [first.id, second.id]


async def test_lead_resigns_and_reports_loss_when_work_fails(
    autojump_clock: trio.testing.MockClock,
) -> None:
    elector = ControlledElector()
    changes: list[bool] = []

    async def work(term: Term) -> None:
        await trio.lowlevel.checkpoint()
        raise StoreError("boom")

    elector.grant()
    with pytest.RaisesGroup(StoreError, allow_unwrapped=True, flatten_subgroups=True):
        await lead(elector, work, on_leadership=changes.append)
    assert changes == [True, False]
    assert elector.resigned == [1]
