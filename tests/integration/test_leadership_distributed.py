"""The scheduler's leadership, with the roles as separate processes on MongoDB (FerretDB),
Kafka and etcd.

Every test starts ``jobscheduler run-<role>`` subprocesses (see ``conftest.py``) and drives
them through the HTTP API, the database, the metrics listener and etcd: two forced leaders
racing over the same due jobs, scheduler failover (crash, graceful stop, lease revoked out
of band) and cron across a leader crash. Jobs through the roles (idempotency, retries,
completion, the reaper) are in ``test_jobs_distributed.py``.

Two schedulers racing over thousands of due jobs relies on atomic conditional writes, which
stock FerretDB v1 lacks; ``scripts/deps.sh`` builds it with the project's patch that adds
them (see ``jobscheduler/store/mongo/store.py``), and a store test checks that build is the one
running.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
import trio

from jobscheduler.domain.model import utc
from tests.integration.conftest import (
    Cluster,
    EtcdAdmin,
    RoleProcess,
    parse_time,
    utc_now,
)

pytestmark = pytest.mark.integration

#: The schedulers' lease TTL in seconds (ELECTION_TTL's default).
ELECTION_TTL = 10
RACE_JOBS = 2000


def _unix_nanos(moment: datetime) -> int:
    return round(moment.timestamp() * 1_000_000) * 1000


async def _wait_leader_gauge(
    cluster: Cluster, process: RoleProcess, value: float, timeout: float
) -> float:
    """Poll ``process``'s ``scheduler_is_leader`` every 20 ms until it equals ``value``;
    returns the monotonic time it was first seen."""
    try:
        with trio.fail_after(timeout):
            while True:
                cluster.assert_alive()
                if await process.metric(cluster.http, "scheduler_is_leader") == value:
                    return time.monotonic()
                await trio.sleep(0.02)
    except trio.TooSlowError:
        raise AssertionError(
            f"{process.name} never reported scheduler_is_leader {value} within {timeout}s:\n"
            f"{process.tail()}"
        ) from None


# --------------------------------------------------------------------------- split brain


async def test_two_forced_leaders_racing_over_2000_due_jobs_never_claim_one_twice(
    cluster: Cluster,
) -> None:
    # Each scheduler campaigns in its own election, so both lead at once: the split brain
    # that fencing by conditional claims must survive.
    schedulers = await cluster.start_all(
        ("scheduler", {"ELECTION_NAME": f"{cluster.election_name}/a"}),
        ("scheduler", {"ELECTION_NAME": f"{cluster.election_name}/b"}),
    )
    for scheduler in schedulers:
        await _wait_leader_gauge(cluster, scheduler, 1.0, timeout=30)
    now = utc(utc_now())
    await cluster.insert_due(
        RACE_JOBS,
        "race",
        lambda i: {"priority": i % 5, "scheduled_at": now - timedelta(seconds=i % 60)},
    )

    async def claimed_counts() -> list[float]:
        return [
            await s.metric(cluster.http, "scheduler_jobs_claimed_total") or 0.0 for s in schedulers
        ]

    with trio.fail_after(180):
        while await cluster.db(lambda c: c.count_documents({"status": "pending"})):
            cluster.assert_alive()
            await trio.sleep(0.5)
    queued = await cluster.db(lambda c: c.count_documents({"status": "queued"}))
    assert queued == RACE_JOBS
    # A claim's jobs show as queued in the store before its scheduler has read the claim's
    # answer and counted them, so the counters may trail the store for a moment.
    counts = await claimed_counts()
    with trio.move_on_after(30):
        while sum(counts) < RACE_JOBS:
            await trio.sleep(0.2)
            counts = await claimed_counts()
    # Each claim that succeeded moved one job from pending to queued once: a job claimed by
    # both leaders would be counted twice, which a last look after the loops settle shows.
    await trio.sleep(2)
    counts = await claimed_counts()
    assert sum(counts) == RACE_JOBS, counts
    assert all(count > 0 for count in counts), f"no race happened: {counts}"


# --------------------------------------------------------------------------- failover


async def test_standby_dispatches_after_the_leader_is_killed(cluster: Cluster) -> None:
    api, _executor, first, second = await cluster.start_all(
        ("api", {}), ("executor", {"JOB_TYPE": "noop"}), ("scheduler", {}), ("scheduler", {})
    )
    leader, (standby,) = await cluster.leader([first, second])

    leader.kill()
    killed_at = time.monotonic()
    job = await cluster.create_job(api)
    dispatched_at = claimed_at = None
    with trio.fail_after(ELECTION_TTL + 20):
        while claimed_at is None:
            current = await cluster.get_job(api, job["id"])
            if dispatched_at is None and current["status"] != "pending":
                dispatched_at = time.monotonic()
            if "claimedAt" in current:
                claimed_at = time.monotonic()
            await trio.sleep(0.05)
    assert dispatched_at is not None
    dispatch_delay, claim_delay = dispatched_at - killed_at, claimed_at - killed_at
    print(
        f"leader SIGKILL -> standby dispatched the job in {dispatch_delay:.2f}s, "
        f"executor claimed it at {claim_delay:.2f}s (ELECTION_TTL={ELECTION_TTL})"
    )
    assert await standby.is_leader(cluster.http)
    assert claim_delay < ELECTION_TTL + 5
    done = await cluster.wait_job(api, job["id"], lambda j: j["status"] == "completed")
    assert done["attempts"] == 1


async def test_standby_leads_at_once_when_the_leader_stops_gracefully(cluster: Cluster) -> None:
    api, _executor, first, second = await cluster.start_all(
        ("api", {}), ("executor", {"JOB_TYPE": "noop"}), ("scheduler", {}), ("scheduler", {})
    )
    leader, (standby,) = await cluster.leader([first, second])

    leader.send(signal.SIGTERM)
    stopped_at = time.monotonic()
    led_at = await _wait_leader_gauge(cluster, standby, 1.0, timeout=15)
    print(f"leader SIGTERM -> standby reports scheduler_is_leader 1: {led_at - stopped_at:.3f}s")
    assert led_at - stopped_at < 3.0
    await leader.stop_ok()
    job = await cluster.create_job(api)
    done = await cluster.wait_job(api, job["id"], lambda j: j["status"] == "completed")
    assert done["attempts"] == 1


async def test_leader_stops_dispatching_when_its_lease_is_revoked(
    cluster: Cluster, etcd_admin: EtcdAdmin
) -> None:
    first, second = await cluster.start_all(("scheduler", {}), ("scheduler", {}))
    leader, (standby,) = await cluster.leader([first, second])
    found = await etcd_admin.leader(cluster.election_name)
    assert found is not None
    lease = found.lease
    assert found.value.decode() == leader.worker_id
    assert found.key.decode() == f"{cluster.election_name}/{lease:x}"

    await etcd_admin.revoke(lease)
    revoked_at = time.monotonic()
    dropped_at = await _wait_leader_gauge(cluster, leader, 0.0, timeout=10)
    print(
        "lease revoked out of band -> old leader reports scheduler_is_leader 0: "
        f"{dropped_at - revoked_at:.3f}s"
    )
    assert dropped_at - revoked_at < 3.0
    # The standby's waiting candidacy is next in line: it takes over, and only it leads.
    new_leader, _ = await cluster.leader([first, second], timeout=10)
    assert new_leader is standby
    found = await etcd_admin.leader(cluster.election_name)
    assert found is not None
    assert found.value.decode() == standby.worker_id
    assert found.lease != lease


# --------------------------------------------------------------------------- cron


async def test_cron_fires_once_per_fire_time_across_a_leader_kill(cluster: Cluster) -> None:
    api, _executor, first, second = await cluster.start_all(
        ("api", {}), ("executor", {"JOB_TYPE": "noop"}), ("scheduler", {}), ("scheduler", {})
    )
    await cluster.leader([first, second])
    # A zone with a half-hour offset and its own DST rule: per-minute fire times are the same
    # instants as in UTC, and each must still spawn exactly once.
    template = await cluster.create_job(
        api, cron="* * * * *", scheduledAt=None, timezone="Australia/Lord_Howe", catchUp="all"
    )
    assert template["timezone"] == "Australia/Lord_Howe"
    template_key = template["idempotencyKey"]
    first_fire = parse_time(template["scheduledAt"])
    assert first_fire.second == first_fire.microsecond == 0
    # The fire time the kill lands before: the first one at least 10 s away.
    fire = first_fire
    if (fire - utc_now()).total_seconds() < 10:
        fire += timedelta(minutes=1)

    def instance_key(fire: datetime) -> str:
        return f"{template_key}-run-{_unix_nanos(fire)}"

    async def wait_instance(fire: datetime, timeout: float) -> dict[str, Any]:
        key = instance_key(fire)
        try:
            with trio.fail_after(timeout):
                while True:
                    cluster.assert_alive()
                    doc = await cluster.db(lambda jobs: jobs.find_one({"idempotencyKey": key}))
                    if doc is not None and doc["status"] == "completed":
                        return dict(doc)
                    await trio.sleep(0.2)
        except trio.TooSlowError:
            raise AssertionError(f"no completed instance {key} within {timeout}s") from None

    # Kill whoever leads about 5 s before that fire time: the standby takes over only after
    # the lease expires, past the fire time, and must still fire it exactly once.
    await trio.sleep(max(0.0, (fire - utc_now()).total_seconds() - 5))
    leader, (standby,) = await cluster.leader([first, second])
    leader.kill()
    instance = await wait_instance(fire, timeout=ELECTION_TTL + 30)
    late = (instance["createdAt"] - fire).total_seconds()
    print(f"cron: fire time {fire:%H:%M:%S} spawned {late:.2f}s late by the new leader")
    assert await standby.is_leader(cluster.http)
    assert instance["scheduledAt"] == fire

    prefix = f"{template_key}-run-"
    keys = await cluster.db(
        lambda jobs: [
            d["idempotencyKey"]
            for d in jobs.find({"idempotencyKey": {"$regex": f"^{prefix}"}}, {"idempotencyKey": 1})
        ]
    )
    per_key = Counter(keys)
    assert per_key[instance_key(fire)] == 1
    assert all(count == 1 for count in per_key.values()), per_key
    for key in per_key:  # every instance belongs to a minute boundary
        assert int(key.removeprefix(prefix)) % (60 * 10**9) == 0, key
    stored_template = await cluster.db(lambda jobs: jobs.find_one({"idempotencyKey": template_key}))
    assert stored_template["status"] == "pending"
    assert stored_template["scheduledAt"] > fire

    # The ledger shows each fire time once, the one the new leader fired like any other
    # (a fire time before the kill, if the test straddled one), and names its very run.
    reply = await cluster.http.get(
        f"{api.url}/jobs/{template['id']}/occurrences", params={"limit": "500"}
    )
    assert reply.status_code == 200, reply.text
    items = reply.json()["occurrences"]
    fire_times = [parse_time(item["fireAt"]) for item in items]
    assert len(fire_times) == len(set(fire_times)), fire_times
    assert sorted(fire_times) == [first_fire + timedelta(minutes=m) for m in range(len(items))]
    by_fire = dict(zip(fire_times, items, strict=True))
    assert by_fire[fire]["status"] == "spawned"
    assert by_fire[fire]["runId"] == str(instance["_id"])
    assert by_fire[fire]["run"]["status"] == "completed"
    print(f"cron ledger: {fire:%H:%M:%S} late by {by_fire[fire]['lateSeconds']}s")
