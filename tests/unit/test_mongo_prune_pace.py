"""The pace of a MongoDB prune: slices sized to the time they take, and a pause as long as
the last one took."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from jobscheduler.store.mongo.upkeep import (
    PRUNE_SLICE_BOUNDS,
    PRUNE_SLICE_FIRST,
    PRUNE_SLICE_SECONDS,
    _Pace,
)


async def _slice(pace: _Pace, took: float) -> None:
    with pace.timed():
        await trio.sleep(took)


async def test_a_quick_slice_at_most_doubles_the_next(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pace = _Pace()
    await _slice(pace, PRUNE_SLICE_SECONDS / 10)
    assert pace.size == 2 * PRUNE_SLICE_FIRST


async def test_a_slow_slice_shrinks_the_next_to_the_aimed_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pace = _Pace()
    await _slice(pace, PRUNE_SLICE_SECONDS * 2)
    assert pace.size == PRUNE_SLICE_FIRST // 2


async def test_the_size_stays_within_its_bounds(autojump_clock: trio.testing.MockClock) -> None:
    low, high = PRUNE_SLICE_BOUNDS
    pace = _Pace()
    for _ in range(20):
        await _slice(pace, 0.0)
    assert pace.size == high
    for _ in range(20):
        await _slice(pace, 60.0)
    assert pace.size == low


async def test_the_rest_is_as_long_as_the_last_slice_took(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pace = _Pace()
    await _slice(pace, 0.2)
    start = trio.current_time()
    await pace.rest()
    assert trio.current_time() - start == pytest.approx(0.2)
