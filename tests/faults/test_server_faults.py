"""Faults of the servers: the MongoDB-protocol store, Kafka and etcd, frozen or killed.

Each runs on the session's private instance (never the shared one on the default port).
"""

from __future__ import annotations

import pytest
import trio

from jobscheduler.domain.durations import parse_duration

from .harness import ROLE_ENV, Harness

pytestmark = pytest.mark.faults

ELECTION_TTL = int(ROLE_ENV["ELECTION_TTL"])
STORE_FREEZE = 15.0
STORE_DOWN = 10.0
KAFKA_FREEZE = 20.0
KAFKA_FREEZES = 2
ETCD_FREEZE = 12.0
QUEUED_TIMEOUT = parse_duration(ROLE_ENV["QUEUED_TIMEOUT"])


async def test_store_freeze_with_a_backlog_gets_503s_and_recovers(harness: Harness) -> None:
    await harness.start()
    async with harness.loaded():
        await harness.warm_up()
        await harness.build_backlog()
        async with harness.fault("store SIGSTOP") as window:
            harness.servers.freeze("ferretdb")
            harness.thaw(*harness.noop)  # the backlog's picks now hang on the store
            await trio.sleep(STORE_FREEZE)
            harness.servers.thaw("ferretdb")
        assert window.end is not None
        await harness.executors_complete_again(window.end, harness.executors)
        await trio.sleep(3)
    harness.require_api_answers(window)
    await harness.settle()


async def test_store_kill_and_restart_with_a_backlog_gets_503s_and_recovers(
    harness: Harness,
) -> None:
    await harness.start()
    async with harness.loaded():
        await harness.warm_up()
        await harness.build_backlog()
        async with harness.fault("store SIGKILL + restart") as window:
            harness.servers.kill("ferretdb")
            harness.thaw(*harness.noop)  # the backlog's picks now fail at once
            await trio.sleep(STORE_DOWN)
            harness.figures["store restart"] = await harness.servers.restart()
        assert window.end is not None
        await harness.executors_complete_again(window.end, harness.executors)
        await trio.sleep(3)
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
            assert window.end is not None
            waits = await harness.executors_complete_again(window.end, harness.executors)
            harness.figures[f"rejoin #{round_}"] = max(waits.values())
            await trio.sleep(3)
    await harness.settle()


async def test_kafka_kill_and_restart_recovers(harness: Harness) -> None:
    await harness.start()
    async with harness.loaded():
        await harness.warm_up()
        async with harness.fault("Kafka SIGKILL + restart") as window:
            harness.servers.kill("kafka")
            await trio.sleep(5)
            harness.figures["Kafka restart"] = await harness.servers.restart()
        assert window.end is not None
        await harness.executors_complete_again(window.end, harness.executors)
        await trio.sleep(3)
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
    await harness.start()
    async with harness.loaded():
        await harness.warm_up()
        await harness.build_backlog()
        async with harness.fault("Kafka SIGKILL under a re-pended backlog") as window:
            harness.servers.kill("kafka")
            await trio.sleep(QUEUED_TIMEOUT + 5)  # the reaper re-pends the backlog
            harness.figures["Kafka restart"] = await harness.servers.restart()
            harness.thaw(*harness.noop)
        assert window.end is not None
        await harness.executors_complete_again(window.end, harness.executors)
        await trio.sleep(3)
    await harness.settle()


async def test_kafka_frozen_while_the_reaper_re_pends_a_backlog_loses_and_doubles_nothing(
    harness: Harness,
) -> None:
    await harness.start()
    async with harness.loaded():
        await harness.warm_up()
        await harness.build_backlog()
        async with harness.fault("Kafka SIGSTOP under a re-pended backlog") as window:
            harness.servers.freeze("kafka")
            await trio.sleep(QUEUED_TIMEOUT + 5)
            harness.servers.thaw("kafka")
            harness.thaw(*harness.noop)
        assert window.end is not None
        await harness.executors_complete_again(window.end, harness.executors)
        await trio.sleep(3)
    await harness.settle()
