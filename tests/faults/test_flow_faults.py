"""Flow control under faults: a per-key concurrency limit of 1 still holds while the
scheduler leader is SIGKILLed (its successor reads the slots from the store) and while an
executor is SIGKILLed mid-job (the reaper's recovery frees its slot, and only then does the
key's next job start). Checked from the attempt records: no two attempts of one key overlap.
And a rate limit, with the leader claiming ahead (``RATE_AHEAD``) past the time a new leader
takes to be elected, keeps its pace through a leader SIGKILL: the executors start what the
dead leader claimed at the instants it gave, and its successor goes on from the stored bucket.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

import pytest
import trio
from bson import ObjectId

from jobscheduler.domain.model import Status
from jobscheduler.store.mongo.store import document_to_job
from tests.support.cluster import parse_time
from tests.support.jobs_api import send

from .harness import Harness

pytestmark = pytest.mark.faults

KEYS = 4
PER_KEY = 8
#: Long enough that the victim executor is mid-job when killed.
SLEEP_MS = 700
#: The harness's ELECTION_TTL (seconds).
ELECTION_TTL = 3


async def override_limits(harness: Harness, job_type: str, limits: dict[str, Any]) -> None:
    """Override ``job_type``'s limits in the test's tenant, and give the leader time to
    read them (it reads the overrides every second)."""
    cluster, api = harness.cluster, harness.api
    assert api is not None
    url = f"{api.url}/flow/limits/{job_type}?tenantId={cluster.tenant}"
    put = await send(cluster.http, "PUT", url, json=limits)
    assert put.status_code == 200, put.text
    await trio.sleep(1.5)


async def test_a_per_key_limit_holds_across_a_leader_kill_and_an_executor_kill(
    harness: Harness,
) -> None:
    # On MongoDB flow control is opt-in (FLOW_CONTROL=auto leaves it off there).
    await harness.start(schedulers=2, noop=1, slow=2, FLOW_CONTROL="1")
    cluster, api = harness.cluster, harness.api
    assert api is not None
    await override_limits(harness, "slow", {"concurrency": 1})
    ids = []
    for i in range(KEYS * PER_KEY):
        job = await cluster.create_job(
            api,
            jobType="slow",
            concurrencyKey=f"customer-{i % KEYS}",
            payload={"sleepMs": SLEEP_MS},
        )
        ids.append(job["id"])
    # Both faults while the keys are busy.
    victim = harness.slow[0]
    with trio.fail_after(30):
        while await harness.count(status="running", claimedBy=victim.worker_id) < 1:
            await trio.sleep(0.05)
    async with harness.fault("executor SIGKILL mid-job"):
        victim.kill()
    leader, _ = await cluster.leader(harness.schedulers)
    async with harness.fault("leader SIGKILL", recovery_bound=ELECTION_TTL + 30):
        leader.kill()
        await harness.add_scheduler(FLOW_CONTROL="1")
        await cluster.leader([s for s in harness.schedulers if not s.killed], timeout=30)
    # The reaper recovers the victim's job after CLAIM_TIMEOUT; every job then completes.
    query = {"_id": {"$in": [ObjectId(i) for i in ids]}, "status": Status.COMPLETED.value}
    with trio.fail_after(120):
        while await harness.count(**query) < len(ids):
            cluster.assert_alive()
            await trio.sleep(0.2)
    spans: dict[str, list[tuple[datetime, datetime, str]]] = defaultdict(list)
    lost = 0
    for job_id in ids:
        answer = await send(cluster.http, "GET", f"{api.url}/jobs/{job_id}/attempts")
        job = await cluster.get_job(api, job_id)
        for attempt in answer.json()["attempts"]:
            lost += attempt["outcome"] == "lost"
            if attempt.get("startedAt") is None:
                continue  # lost while only claimed: it never ran
            spans[job["concurrencyKey"]].append(
                (parse_time(attempt["startedAt"]), parse_time(attempt["finishedAt"]), job_id)
            )
    assert lost >= 1, "the victim's job was not recovered as a lost attempt"
    for key, runs in spans.items():
        runs.sort()
        for (_, end, before), (start, _, after) in itertools.pairwise(runs):
            assert start >= end, f"{key}: {after} started at {start}, {before} ended at {end}"
    await harness.settle()


#: The rate of the rate-limit scenario (per second) and its jobs. (The test stack's FerretDB
#: claims flow-controlled jobs one update each: 20-40 a second on a loaded machine, so a
#: higher rate would measure the store, not the failover.)
RATE = 10
RATED_JOBS = 600


async def test_a_rate_limit_keeps_its_pace_across_a_leader_kill(harness: Harness) -> None:
    await harness.start(schedulers=2, noop=2, slow=0, FLOW_CONTROL="1", RATE_AHEAD="30s")
    cluster, api = harness.cluster, harness.api
    assert api is not None
    await override_limits(harness, "noop", {"rateLimit": f"{RATE}/s", "burst": 1})
    jobs = await cluster.insert_due(RATED_JOBS, "rated")
    # Killed once its claims reach well ahead (the first ones take seconds each here), with
    # half of the jobs still to claim.
    await trio.sleep(20)
    leader, _ = await cluster.leader(harness.schedulers)
    async with harness.fault("leader SIGKILL under a rate limit", recovery_bound=30):
        leader.kill()
        await harness.add_scheduler(FLOW_CONTROL="1", RATE_AHEAD="30s")
    query = {"_id": {"$in": [ObjectId(job.id) for job in jobs]}, "status": "completed"}
    with trio.fail_after(RATED_JOBS / RATE + 60):
        while await harness.count(**query) < RATED_JOBS:
            cluster.assert_alive()
            await trio.sleep(0.5)
    documents = await cluster.db(lambda c: list(c.find(query)))
    starts = sorted(document_to_job(doc).claimed_at for doc in documents)
    first = starts[0]
    windows = Counter(int((start - first).total_seconds()) for start in starts)
    # Every whole second after the first, the last one cut short by the end of the jobs.
    counts = [windows[second] for second in range(1, max(windows))]
    # The pace is the leader's instants plus each start's own latency on a shared machine:
    # a second may lose a few starts to the next. A second with none, as a failover without
    # jobs claimed ahead leaves, fails; and no second runs far over the rate.
    assert min(counts) >= RATE * 0.6, counts
    assert max(counts) <= RATE * 1.4, counts
    assert sum(counts) <= RATE * len(counts) + RATE * 0.2
    await harness.settle()
