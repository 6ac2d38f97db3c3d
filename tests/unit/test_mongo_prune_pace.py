"""The pace of a MongoDB prune's deletes: slices sized to the time they take, and a pause
as long as each took."""

from __future__ import annotations

import trio
import trio.testing

from jobscheduler.store.mongo.upkeep import (
    PRUNE_SLICE_BOUNDS,
    PRUNE_SLICE_FIRST,
    PRUNE_SLICE_SECONDS,
    _Pace,
)


async def test_a_quick_slice_at_most_doubles_the_next() -> None:
    pace = _Pace()
    await pace.after(PRUNE_SLICE_SECONDS / 10, more=False)
    assert pace.size == 2 * PRUNE_SLICE_FIRST


async def test_a_slow_slice_shrinks_the_next_to_the_aimed_time() -> None:
    pace = _Pace()
    await pace.after(PRUNE_SLICE_SECONDS * 2, more=False)
    assert pace.size == PRUNE_SLICE_FIRST // 2


async def test_the_size_stays_within_its_bounds() -> None:
    low, high = PRUNE_SLICE_BOUNDS
    pace = _Pace()
    for _ in range(20):
        await pace.after(0.0, more=False)
    assert pace.size == high
    for _ in range(20):
        await pace.after(60.0, more=False)
    assert pace.size == low


async def test_the_pause_is_as_long_as_the_slice_took_and_none_after_the_last(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pace = _Pace()
    start = trio.current_time()
    await pace.after(0.2, more=True)
    assert trio.current_time() - start == 0.2
    await pace.after(0.2, more=False)
    assert trio.current_time() - start == 0.2
