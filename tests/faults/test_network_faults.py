"""Faults of the network: every role reaches etcd, Kafka and the store through a Toxiproxy
link (tests/support/servers.py), and each fault breaks all three links for a while.

- latency: 50 ms, +/- 25 ms of jitter, on every chunk in both directions;
- resets: every connection reset by its peer shortly after it opens, mid-stream for the
  calls in flight;
- half-open: connections still accepted, bytes still taken, nothing ever answered or closed.

One cluster meets each in turn, for :data:`NETWORK_FAULT` seconds under the load: nothing
lost, nothing doubled (the history checker), every create answered within the client's
timeout, and new work completing within :data:`HEALED_BOUND` seconds of the network healing.
"""

from __future__ import annotations

import pytest
import trio

from tests.support.toxiproxy import Toxic, half_open, latency, resets

from .harness import Harness

pytestmark = pytest.mark.faults

NETWORK_FAULT = 20.0
#: New work completes within this many seconds of the network healing.
HEALED_BOUND = 5.0


async def test_latency_resets_and_half_open_links_lose_and_double_nothing(
    harness: Harness,
) -> None:
    # One cluster meets the three faults in turn, each on every link at once, healed between.
    faults: list[tuple[str, Toxic]] = [
        ("50 ms +/- 25 ms on every link", latency(50, 25)),
        ("connections reset on every link", resets(after_ms=300)),
        ("half-open connections on every link", half_open()),
    ]
    await harness.start()
    links = list(harness.servers.links.values())
    async with harness.loaded():
        await harness.warm_up()
        for name, toxic in faults:
            async with (
                harness.fault(name, recovery_bound=HEALED_BOUND) as window,
                harness.servers.proxy.poisoned(links, toxic),
            ):
                await trio.sleep(NETWORK_FAULT)
            harness.require_api_answers(window, with_503=False)
            await trio.sleep(HEALED_BOUND + 3)
    await harness.settle()
