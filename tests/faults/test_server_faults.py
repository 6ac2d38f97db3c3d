"""Faults of the servers: the MongoDB-protocol store, Kafka and etcd, frozen or killed.

Each runs on the session's private instance (never the shared one on the default port).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from jobscheduler.domain.durations import parse_duration

from .checks import Window
from .harness import ROLE_ENV, Harness

pytestmark = pytest.mark.faults

ELECTION_TTL = int(ROLE_ENV["ELECTION_TTL"])
STORE_FREEZE = 15.0
STORE_DOWN = 10.0
KAFKA_FREEZE = 20.0
KAFKA_FREEZES = 2
ETCD_FREEZE = 12.0
QUEUED_TIMEOUT = parse_duration(ROLE_ENV["QUEUED_TIMEOUT"])


@asynccontextmanager
async def fault_under_a_backlog(harness: Harness, name: str) -> AsyncIterator[Window]:
    """The roles started, the load running and a backlog of wake-ups waiting in Kafka for
    the stopped ``noop`` executors: the block is the fault (it resumes them); after it, every
    executor consumes again."""
    await harness.start()
    async with harness.loaded():
        await harness.warm_up()
        await harness.build_backlog()
        async with harness.fault(name) as window:
            yield window
        await harness.consuming_again(window)


async def test_store_freeze_with_a_backlog_gets_503s_and_recovers(harness: Harness) -> None:
    async with fault_under_a_backlog(harness, "store SIGSTOP") as window:
        harness.servers.freeze("ferretdb")
        harness.thaw(*harness.noop)  # the backlog's picks now hang on the store
        await trio.sleep(STORE_FREEZE)
        harness.servers.thaw("ferretdb")
    harness.require_api_answers(window)
    await harness.settle()


async def test_store_kill_and_restart_with_a_backlog_gets_503s_and_recovers(
    harness: Harness,
) -> None:
    async with fault_under_a_backlog(harness, "store SIGKILL + restart") as window:
        harness.servers.kill("ferretdb")
        harness.thaw(*harness.noop)  # the backlog's picks now fail at once
        await trio.sleep(STORE_DOWN)
        harness.figures["store restart"] = await harness.servers.restart()
    harness.require_api_answers(window)
    await harness.settle()


async def test_repeated_kafka_freezes_leave_every_executor_consuming(harness: Harness) -> None:
    await harness.start()
    async with harness.loaded():
        await harness.warm_up()
        for round_ in range(1, KAFKA_FREEZES + 1):
            async with harness.fault(f"Kafka SIGSTOP #{round_}") as window:
                harness.servers.freeze("kafka")
                await trio.sleep(KAFKA_FREEZE)
                harness.servers.thaw("kafka")
            waits = await harness.consuming_again(window)
            harness.figures[f"rejoin #{round_}"] = max(waits.values())
    await harness.settle()


async def test_kafka_kill_and_restart_recovers(harness: Harness) -> None:
    await harness.start()
    async with harness.loaded():
        await harness.warm_up()
        async with harness.fault("Kafka SIGKILL + restart") as window:
            harness.servers.kill("kafka")
            await trio.sleep(5)
            harness.figures["Kafka restart"] = await harness.servers.restart()
        await harness.consuming_again(window)
    await harness.settle()


async def test_etcd_freeze_past_the_lease_resumes_dispatch(harness: Harness) -> None:
    await harness.start(schedulers=2)
    async with harness.loaded():
        await harness.warm_up()
        async with harness.fault("etcd SIGSTOP"):
            harness.servers.freeze("etcd")
            await trio.sleep(ETCD_FREEZE)
            harness.servers.thaw("etcd")
        await harness.cluster.leader(harness.schedulers, timeout=ELECTION_TTL + 15)
        await trio.sleep(3)
    await harness.settle()


async def test_kafka_killed_while_the_reaper_re_pends_a_backlog_loses_and_doubles_nothing(
    harness: Harness,
) -> None:
    # A backlog's wake-ups wait in Kafka for stopped executors; Kafka dies, the jobs stay
    # queued past QUEUED_TIMEOUT, the reaper re-pends them and the scheduler publishes again
    # into a dead bus. When Kafka and the executors are back, old and new wake-ups arrive
    # for the same jobs: each must run once.
    async with fault_under_a_backlog(harness, "Kafka SIGKILL under a re-pended backlog"):
        harness.servers.kill("kafka")
        await trio.sleep(QUEUED_TIMEOUT + 5)  # the reaper re-pends the backlog
        harness.figures["Kafka restart"] = await harness.servers.restart()
        harness.thaw(*harness.noop)
    await harness.settle()


async def test_kafka_frozen_while_the_reaper_re_pends_a_backlog_loses_and_doubles_nothing(
    harness: Harness,
) -> None:
    async with fault_under_a_backlog(harness, "Kafka SIGSTOP under a re-pended backlog"):
        harness.servers.freeze("kafka")
        await trio.sleep(QUEUED_TIMEOUT + 5)
        harness.servers.thaw("kafka")
        harness.thaw(*harness.noop)
    await harness.settle()
