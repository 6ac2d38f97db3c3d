"""Faults of the role processes: a frozen scheduler leader, executors killed or frozen."""

from __future__ import annotations

import pytest
import trio

from .harness import ROLE_ENV, Harness

pytestmark = pytest.mark.faults

ELECTION_TTL = int(ROLE_ENV["ELECTION_TTL"])
#: The broker's consumer session timeout (scripts/deps.sh: group.consumer.session.timeout.ms).
SESSION_TIMEOUT = 10.0


async def test_a_leader_frozen_past_its_lease_is_replaced_and_steps_down(harness: Harness) -> None:
    await harness.start(schedulers=2)
    async with harness.loaded():
        await harness.warm_up()
        leader, (standby,) = await harness.cluster.leader(harness.schedulers)
        async with harness.fault("leader SIGSTOP"):
            harness.freeze(leader)
            # The standby takes over once the frozen leader's lease expires.
            new_leader, _ = await harness.cluster.leader([standby], timeout=ELECTION_TTL + 15)
            assert new_leader is standby
            await trio.sleep(ELECTION_TTL + 2)
            harness.thaw(leader)
        # Woken, the old leader finds its lease gone and stops dispatching: one leader.
        with trio.fail_after(15):
            while await leader.is_leader(harness.cluster.http):
                await trio.sleep(0.1)
        assert await standby.is_leader(harness.cluster.http)
        await trio.sleep(3)
    await harness.settle()


async def test_an_executor_killed_during_handlers_loses_no_job(harness: Harness) -> None:
    await harness.start(slow=2)
    victim = harness.slow[0]
    async with harness.loaded():
        await harness.warm_up()
        with trio.fail_after(20):  # wait until the victim is running slow handlers
            while await harness.count(status="running", claimedBy=victim.worker_id) < 2:
                await trio.sleep(0.1)
        async with harness.fault("executor SIGKILL"):
            victim.kill()
            harness.slow.remove(victim)
        await trio.sleep(SESSION_TIMEOUT)
    await harness.settle()


async def test_an_executor_frozen_past_its_consumer_session_rejoins(harness: Harness) -> None:
    await harness.start(slow=2)
    victim = harness.slow[0]
    async with harness.loaded():
        await harness.warm_up()
        with trio.fail_after(20):
            while await harness.count(status="running", claimedBy=victim.worker_id) < 2:
                await trio.sleep(0.1)
        async with harness.fault("executor SIGSTOP") as window:
            harness.freeze(victim)
            await trio.sleep(SESSION_TIMEOUT + 5)
            harness.thaw(victim)
        assert window.end is not None
        # The thawed executor was fenced out of its group; it must consume again.
        await harness.executors_complete_again(window.end, [victim])
        await trio.sleep(3)
    await harness.settle()
