"""Faults of the role processes: a frozen scheduler leader, executors killed or frozen."""

from __future__ import annotations

import time

import pytest
import trio
from bson import ObjectId

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
            frozen_at = trio.current_time()
            # The standby takes over once the frozen leader's lease expires.
            new_leader, _ = await harness.cluster.leader([standby], timeout=ELECTION_TTL + 15)
            assert new_leader is standby
            harness.figures["failover"] = trio.current_time() - frozen_at
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
        await harness.running_on(victim)  # the victim runs slow handlers
        async with harness.fault("executor SIGKILL"):
            victim.kill()
            killed_at = trio.current_time()
        running = await harness.jobs(status="running", claimedBy=victim.worker_id)
        assert running, "the victim's handlers were running when it was killed"
        # The reaper recovers them after CLAIM_TIMEOUT; the other executor runs them again.
        ids = [job.id for job in running]
        with trio.fail_after(30):
            while await harness.count(
                _id={"$in": [ObjectId(i) for i in ids]}, status="completed"
            ) < len(ids):
                await trio.sleep(0.2)
        harness.figures["killed jobs completed"] = trio.current_time() - killed_at
        await trio.sleep(2)
    await harness.settle()


async def test_an_executor_frozen_past_its_consumer_session_rejoins(harness: Harness) -> None:
    await harness.start(slow=2)
    victim = harness.slow[0]
    async with harness.loaded():
        await harness.warm_up()
        await harness.running_on(victim)  # the victim runs slow handlers
        async with harness.fault("executor SIGSTOP") as window:
            harness.freeze(victim)
            await trio.sleep(SESSION_TIMEOUT + 5)
            harness.thaw(victim)
        # The thawed executor was fenced out of its group; it must consume again.
        waits = await harness.consuming_again(window, [victim])
        harness.figures["rejoin"] = waits[victim.name]
    await harness.settle()


#: Per-minute templates of the leader-handoff scenario.
TEMPLATES = 10


async def sleep_until_before_minute(seconds_before: float, *, at_least: float = 5.0) -> float:
    """Sleep until ``seconds_before`` the next minute boundary at least ``at_least`` seconds
    away; returns that boundary (epoch seconds)."""
    now = time.time()
    boundary = (now // 60 + 1) * 60
    if boundary - seconds_before - now < at_least:
        boundary += 60
    await trio.sleep(boundary - seconds_before - time.time())
    return boundary


async def test_leader_killed_and_frozen_at_minute_boundaries_fires_each_template_once_a_minute(
    harness: Harness,
) -> None:
    # Peers lose and double cron fires at leader handoffs (an 8 ms handoff across a minute
    # boundary dropped jobs; a stale leader inserted every cron job twice). One run per
    # (template, fire time) is the promise: the history checker holds every template of
    # catchUp=all to exactly one run per minute, from its creation to the end.
    await harness.start(schedulers=2)
    async with harness.loaded():
        await harness.warm_up()
        for n in range(TEMPLATES):
            await harness.cluster.create_job(
                harness.api, cron="* * * * *", catchUp="all", scheduledAt=None,
                idempotencyKey=f"minutely-{harness.cluster.suffix}-{n}",
            )  # fmt: skip
        leader, _ = await harness.cluster.leader(harness.schedulers)
        await sleep_until_before_minute(0.3)
        async with harness.fault("leader SIGKILL 0.3 s before a minute boundary"):
            leader.kill()
            replacement = await harness.add_scheduler()
            leader, _ = await harness.cluster.leader(
                [s for s in harness.schedulers if not s.killed], timeout=ELECTION_TTL + 20
            )
        boundary = await sleep_until_before_minute(1.0)
        async with harness.fault("leader SIGSTOP across a minute boundary"):
            harness.freeze(leader)
            await trio.sleep(boundary + ELECTION_TTL + 2 - time.time())
            harness.thaw(leader)
        await harness.cluster.leader([s for s in harness.schedulers if not s.killed])
        await trio.sleep(3)  # the thawed leader's stale writes, if any, land before the read
        assert replacement.running()
    await harness.settle()
