"""Flow control under faults: a per-key concurrency limit of 1 still holds while the
scheduler leader is SIGKILLed (its successor reads the slots from the store) and while an
executor is SIGKILLed mid-job (the reaper's recovery frees its slot, and only then does the
key's next job start). Checked from the attempt records: no two attempts of one key overlap.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from datetime import datetime

import pytest
import trio
from bson import ObjectId

from jobscheduler.domain.model import Status
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


async def test_a_per_key_limit_holds_across_a_leader_kill_and_an_executor_kill(
    harness: Harness,
) -> None:
    # On MongoDB flow control is opt-in (FLOW_CONTROL=auto leaves it off there).
    await harness.start(schedulers=2, noop=1, slow=2, FLOW_CONTROL="1")
    cluster, api = harness.cluster, harness.api
    assert api is not None
    put = await send(
        cluster.http,
        "PUT",
        f"{api.url}/flow/limits/slow?tenantId={cluster.tenant}",
        json={"concurrency": 1},
    )
    assert put.status_code == 200, put.text
    await trio.sleep(1.5)  # the leader reads the overrides every second
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
