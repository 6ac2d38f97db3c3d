"""The waker: how a notified due time shortens (or leaves alone) the scheduler's sleep, in
virtual time.
"""

from __future__ import annotations

from datetime import datetime

import pytest
import trio
import trio.testing

from jobscheduler.roles.deps import Waker

from .conftest import BASE, after, make_clock


@pytest.mark.parametrize(
    ("notified", "woken"),
    [
        pytest.param([20], 10, id="an-earlier-due-time-wakes-the-sleeper-at-once"),
        pytest.param([100, 500], 100, id="a-later-due-time-does-not-wake-the-sleeper"),
    ],
)
async def test_waker_notify_while_asleep(
    autojump_clock: trio.testing.MockClock, notified: list[int], woken: int
) -> None:
    clock = make_clock()
    waker = Waker(clock)
    woke: list[datetime] = []

    async def sleeper() -> None:
        await waker.sleep_until(after(100))
        woke.append(clock.now())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sleeper)
        await trio.sleep(10)
        for seconds in notified:
            waker.notify(after(seconds))
    assert woke == [after(woken)]


async def test_waker_notify_while_awake_ends_only_the_next_sleep_by_that_due_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = make_clock()
    waker = Waker(clock)
    waker.notify(after(50))  # the scheduler is busy ticking: it must not miss this
    waker.notify(after(70))
    await waker.sleep_until(after(100))
    assert clock.now() == after(50)
    await waker.sleep_until(after(150))
    assert clock.now() == after(150)


@pytest.mark.parametrize(
    ("notified", "woken"),
    [
        pytest.param([-1], 0, id="an-already-due-job-ends-the-next-sleep-at-once"),
        # Regression: every create of a job due later woke the scheduler for a needless
        # tick (four store reads) while it was busy, so under create load it never slept.
        pytest.param([5000, 86_400, 100], 100, id="a-job-due-after-the-next-sleep-changes-nothing"),
    ],
)
async def test_waker_notify_while_awake_of_one_due_time(
    autojump_clock: trio.testing.MockClock, notified: list[int], woken: int
) -> None:
    clock = make_clock()
    waker = Waker(clock)
    for seconds in notified:
        waker.notify(after(seconds))
    await waker.sleep_until(after(100))
    assert clock.now() == after(woken)


async def test_waker_sleep_until_a_past_deadline_returns_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    clock = make_clock()
    await Waker(clock).sleep_until(after(-5))
    assert clock.now() == BASE
