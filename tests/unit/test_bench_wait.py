"""The bench's wait for another process's completions: few scrapes while the end is far,
fine ones near it, and never past the target unseen for longer than the finest pause."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from jobscheduler.tools.bench.wait import COARSE, FINE, next_pause, until_completed


def test_the_pause_is_coarse_before_a_rate_is_seen_and_a_third_of_the_rest_after() -> None:
    assert next_pause(0, 5_000, 0.0) == COARSE
    assert next_pause(0, 5_000, 1_000.0) == COARSE  # 5 s left
    assert next_pause(4_700, 5_000, 1_000.0) == pytest.approx(0.1)  # 0.3 s left
    assert next_pause(4_990, 5_000, 1_000.0) == FINE  # 10 ms left


async def test_a_steady_drain_is_seen_ending_within_the_finest_pause_with_few_scrapes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    rate, target = 2_000.0, 20_000
    start = trio.current_time()
    scrapes = 0

    async def completed() -> float:
        nonlocal scrapes
        scrapes += 1
        return min(target, (trio.current_time() - start) * rate)

    await until_completed(completed, target)
    ends = start + target / rate
    assert ends <= trio.current_time() <= ends + FINE
    assert scrapes < (target / rate) / FINE / 5  # polling every FINE would scrape 500 times
