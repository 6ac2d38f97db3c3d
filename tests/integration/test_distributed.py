"""The roles as separate processes on MongoDB (FerretDB), Kafka and etcd.

Every test starts ``jobscheduler run-<role>`` subprocesses (see ``conftest.py``) and drives
them through the HTTP API, the database, the metrics listener, Kafka and etcd: idempotent
creation, retry and dead-lettering, end-to-end completion, the reaper's two recoveries,
scheduler failover (crash, graceful stop, lease revoked out of band) and cron across a
leader crash.

Two schedulers racing over thousands of due jobs relies on atomic conditional writes, which
stock FerretDB v1 lacks; ``scripts/deps.sh`` builds it with the project's patch that adds
them (see ``jobscheduler/store/mongo.py``), and a store test checks that build is the one
running.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, KafkaError

from jobscheduler.bus.base import dlq_topic
from jobscheduler.model import Job, new_job_id, utc
from jobscheduler.store.mongo import job_to_document
from tests.integration.conftest import (
    Cluster,
    EtcdAdmin,
    RoleProcess,
    kafka_brokers,
    metric_value,
    parse_time,
    utc_now,
)

pytestmark = pytest.mark.integration

#: The schedulers' lease TTL in seconds (ELECTION_TTL's default).
ELECTION_TTL = 10
FAR_FUTURE = "2099-01-01T00:00:00Z"
RACE_JOBS = 5000


def _unix_nanos(moment: datetime) -> int:
    return round(moment.timestamp() * 1_000_000) * 1000


def _consume_dead_letter(topic: str, job_id: str, timeout: float) -> dict[str, Any] | None:
    """Read the DLQ ``topic`` from the beginning with a fresh consumer group until the message
    for ``job_id`` arrives (its value, decoded) or ``timeout`` passes (None). Blocking."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_brokers(),
            "group.id": f"it-dlq-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consuming {topic} failed: {error}")
            if (message.key() or b"").decode() != job_id:
                continue
            value: dict[str, Any] = json.loads(message.value() or b"{}")
            if value.get("jobId") == job_id:
                return value
        return None
    finally:
        consumer.close()


# --------------------------------------------------------------------------- idempotency


async def test_concurrent_creates_with_one_idempotency_key_store_one_job(cluster: Cluster) -> None:
    api = await cluster.start("api")
    body = cluster.job_body(scheduledAt=FAR_FUTURE)
    responses: list[tuple[int, dict[str, Any]]] = []

    async def post() -> None:
        response = await cluster.http.post(f"{api.url}/jobs", json=body)
        responses.append((response.status_code, response.json()))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(post)

    assert Counter(status for status, _ in responses) == {201: 1, 409: 49}
    (created,) = [payload for status, payload in responses if status == 201]
    for status, payload in responses:
        if status == 409:
            assert "idempotencyKey" in payload["error"], payload
            assert payload["jobId"] == created["id"]
    docs = await cluster.db(
        lambda jobs: list(jobs.find({"idempotencyKey": body["idempotencyKey"]}))
    )
    assert len(docs) == 1
    assert str(docs[0]["_id"]) == created["id"]
    assert docs[0]["status"] == "pending"


async def test_concurrent_batches_store_each_key_once_and_name_its_holder(
    cluster: Cluster,
) -> None:
    api = await cluster.start("api")
    bodies = [cluster.job_body(scheduledAt=FAR_FUTURE) for _ in range(300)]
    invalid = cluster.job_body(jobType="nope")
    answered: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    async def post(jobs: list[dict[str, Any]]) -> None:
        response = await cluster.http.post(f"{api.url}/jobs/batch", json={"jobs": jobs})
        assert response.status_code == 200, response.text
        answered.append((jobs, response.json()["results"]))

    # Three overlapping batches at once: entries 0-199, 100-299 and 0-299, each with an
    # invalid entry at the end.
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for chunk in (bodies[:200], bodies[100:], bodies):
                nursery.start_soon(post, [*chunk, invalid])

    holders: dict[str, str] = {}
    for jobs, results in answered:
        assert len(results) == len(jobs)
        assert results[-1]["status"] == 400
        for job, result in zip(jobs[:-1], results[:-1], strict=True):
            if result["status"] == 201:
                assert job["idempotencyKey"] not in holders  # stored by one batch only
                holders[job["idempotencyKey"]] = result["job"]["id"]
    assert len(holders) == len(bodies)
    for jobs, results in answered:
        for job, result in zip(jobs[:-1], results[:-1], strict=True):
            if result["status"] != 201:
                assert result["status"] == 409, result
                assert result["jobId"] == holders[job["idempotencyKey"]]
    docs = await cluster.db(lambda jobs: list(jobs.find({"tenantId": cluster.tenant})))
    assert sorted(str(d["_id"]) for d in docs) == sorted(holders.values())


# --------------------------------------------------------------------------- retry and DLQ


async def test_failing_job_retries_with_backoff_then_dead_letters(cluster: Cluster) -> None:
    api, scheduler, executor, reaper = await cluster.start_all(
        ("api", {}), ("scheduler", {}), ("executor", {"JOB_TYPE": "flaky"}), ("reaper", {})
    )
    await cluster.leader([scheduler])
    job = await cluster.create_job(api, jobType="flaky", payload={"failRate": 1}, maxAttempts=3)

    # Follow the job closely, keeping the first snapshot of each (status, attempts) state.
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    current: dict[str, Any] = job
    try:
        with trio.fail_after(60):
            while current["status"] != "dlq":
                await trio.sleep(0.05)
                current = await cluster.get_job(api, job["id"])
                seen.setdefault((current["status"], current["attempts"]), current)
    except trio.TooSlowError:
        raise AssertionError(f"job never reached dlq in 60s; states seen: {seen}") from None

    pending_1, pending_2 = seen.get(("pending", 1)), seen.get(("pending", 2))
    assert pending_1 is not None, f"never saw the first retry pending; states: {list(seen)}"
    assert pending_2 is not None, f"never saw the second retry pending; states: {list(seen)}"
    final = current
    # Each failure pushed scheduledAt out by 2^attempts seconds from the failure time.
    for pending, backoff in ((pending_1, 2.0), (pending_2, 4.0)):
        delay = parse_time(pending["scheduledAt"]) - parse_time(pending["updatedAt"])
        assert abs(delay.total_seconds() - backoff) < 0.01, pending
        assert pending["lastError"].startswith("HandlerError: flaky"), pending
    # ... and the next attempt was picked up no earlier than that, within a few ticks.
    for before, after in ((pending_1, pending_2), (pending_2, final)):
        retry_at, picked_at = parse_time(before["scheduledAt"]), parse_time(after["claimedAt"])
        assert timedelta(0) <= picked_at - retry_at < timedelta(seconds=3), (before, after)

    def gap(earlier: dict[str, Any], later: dict[str, Any]) -> float:
        return (parse_time(later["claimedAt"]) - parse_time(earlier["updatedAt"])).total_seconds()

    print(
        f"retry spacing: attempt 2 picked {gap(pending_1, pending_2):.2f}s after failure 1, "
        f"attempt 3 picked {gap(pending_2, final):.2f}s after failure 2"
    )
    assert final["attempts"] == 3
    assert final["lastError"].startswith("HandlerError: flaky: simulated failure"), final
    assert final["claimedBy"] == executor.worker_id

    topic = dlq_topic(cluster.topic_prefix)
    letter = await trio.to_thread.run_sync(_consume_dead_letter, topic, job["id"], 30.0)
    assert letter is not None, f"no message for job {job['id']} on {topic} within 30s"
    assert letter["attempts"] == 3
    assert letter["jobType"] == "flaky"
    assert letter["tenantId"] == cluster.tenant
    assert letter["lastError"] == final["lastError"]

    metrics = await executor.metrics(cluster.http)
    assert (
        metric_value(metrics, "executor_jobs_processed_total", job_type="flaky", result="retried")
        == 2
    )
    assert (
        metric_value(metrics, "executor_jobs_processed_total", job_type="flaky", result="dlq") == 1
    )
    assert await reaper.metric(cluster.http, "reaper_recovered_jobs_total", sweep="claimed") == 0


# --------------------------------------------------------------------------- end to end


async def test_bug_run_executor_keeps_running_until_signalled(cluster: Cluster) -> None:
    """``jobscheduler run-executor`` must consume until SIGTERM. In ``run_roles``
    (jobscheduler/app.py) the front nursery holds only the api, scheduler and reaper roles;
    in an executor-only process it is empty, exits at once, and the ``drain.set()`` after
    it makes the executor drain and the process exit 0 right after logging ``ready``."""
    executor = await cluster.start("executor", JOB_TYPE="noop")
    with trio.move_on_after(3):
        while executor.running():
            await trio.sleep(0.05)
    if not executor.running():
        executor.signalled = True  # reported here, not again by the fixture's teardown
        raise AssertionError(
            f"run-executor exited on its own with code {executor.proc and executor.proc.returncode}"
            f" within 3s of start, without a signal:\n{executor.tail(15)}"
        )


async def test_jobs_complete_end_to_end_through_role_processes(cluster: Cluster) -> None:
    api, scheduler, noop, log_message = await cluster.start_all(
        ("api", {}),
        ("scheduler", {}),
        ("executor", {"JOB_TYPE": "noop"}),
        ("executor", {"JOB_TYPE": "log-message"}),
    )
    await cluster.leader([scheduler])
    message = f"hello from the integration test {cluster.suffix}"
    noop_job = await cluster.create_job(api, jobType="noop")
    log_job = await cluster.create_job(
        api, jobType="log-message", payload={"message": message}, priority=5
    )

    for job, executor in ((noop_job, noop), (log_job, log_message)):
        done = await cluster.wait_job(api, job["id"], lambda j: j["status"] == "completed")
        assert done["attempts"] == 1  # attempts started: the first one completed
        assert done["claimedBy"] == executor.worker_id
        assert parse_time(done["claimedAt"]) >= parse_time(done["createdAt"])
        assert "lastError" not in done
    assert message in log_message.log()
    assert (
        await noop.metric(
            cluster.http, "executor_jobs_processed_total", job_type="noop", result="completed"
        )
        == 1
    )
    assert await scheduler.metric(cluster.http, "scheduler_jobs_claimed_total") == 2
    listed = await cluster.http.get(f"{api.url}/jobs", params={"tenantId": cluster.tenant})
    assert {j["id"] for j in listed.json()} == {noop_job["id"], log_job["id"]}


async def test_two_forced_leaders_racing_over_5000_due_jobs_never_claim_one_twice(
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
    jobs = [
        Job(
            id=new_job_id(),
            idempotency_key=f"race-{cluster.suffix}-{i}",
            tenant_id=cluster.tenant,
            job_type="noop",
            priority=i % 5,
            scheduled_at=now - timedelta(seconds=i % 60),
            created_at=now,
            updated_at=now,
        )
        for i in range(RACE_JOBS)
    ]
    await cluster.db(lambda c: c.insert_many([job_to_document(job) for job in jobs]))

    async def claimed_counts() -> list[float]:
        return [
            await s.metric(cluster.http, "scheduler_jobs_claimed_total") or 0.0 for s in schedulers
        ]

    with trio.fail_after(180):
        while await cluster.db(lambda c: c.count_documents({"status": "pending"})):
            cluster.assert_alive()
            await trio.sleep(0.5)
    # Both loops have finished their last batch once the counters stop moving.
    counts = await claimed_counts()
    while (later := await claimed_counts()) != counts:
        counts = later
        await trio.sleep(1)

    queued = await cluster.db(lambda c: c.count_documents({"status": "queued"}))
    assert queued == RACE_JOBS
    # Each claim that succeeded moved one job from pending to queued once: a job claimed by
    # both leaders would be counted twice.
    assert sum(counts) == RACE_JOBS, counts
    assert all(count > 0 for count in counts), f"no race happened: {counts}"


# --------------------------------------------------------------------------- reaper


async def test_job_of_a_killed_executor_is_recovered_and_completes(cluster: Cluster) -> None:
    fast_heartbeat = {"HEARTBEAT_INTERVAL": "500ms"}  # every role validates it < CLAIM_TIMEOUT
    api, scheduler, executor, reaper = await cluster.start_all(
        ("api", fast_heartbeat),
        ("scheduler", fast_heartbeat),
        ("executor", {**fast_heartbeat, "JOB_TYPE": "slow"}),
        ("reaper", {**fast_heartbeat, "CLAIM_TIMEOUT": "2s", "REAPER_INTERVAL": "200ms"}),
    )
    await cluster.leader([scheduler])
    job = await cluster.create_job(api, jobType="slow", payload={"sleepMs": 4000})
    running = await cluster.wait_job(api, job["id"], lambda j: j["status"] == "running")
    assert running["claimedBy"] == executor.worker_id

    executor.kill()
    killed_at = time.monotonic()
    replacement = await cluster.start("executor", **fast_heartbeat, JOB_TYPE="slow")
    # The reaper notices after CLAIM_TIMEOUT without a heartbeat: a failed attempt.
    recovered = await cluster.wait_job(
        api, job["id"], lambda j: "lastError" in j, timeout=20, interval=0.1
    )
    assert recovered["attempts"] == 1
    assert recovered["lastError"].startswith("lost:"), recovered
    assert executor.worker_id in recovered["lastError"]
    # The killed member keeps its Kafka partitions until the group coordinator expires its
    # session (45 s by default), so the replacement may get the wake-up only then.
    done = await cluster.wait_job(
        api, job["id"], lambda j: j["status"] == "completed", timeout=120, interval=0.2
    )
    print(
        f"executor SIGKILL -> job completed by the replacement: {time.monotonic() - killed_at:.1f}s"
    )
    assert done["attempts"] == 2  # the lost one, then the one that completed
    assert done["lastError"].startswith("lost:"), done
    assert done["claimedBy"] == replacement.worker_id
    # On MongoDB an outcome's attempt record is written just after the outcome (no
    # transactions), so it may show up a moment after the status does.
    history: list[tuple[int, str, str]] = []
    with trio.move_on_after(10):
        while len(history) < 2:
            reply = await cluster.http.get(f"{api.url}/jobs/{job['id']}/attempts")
            history = [(a["number"], a["outcome"], a["worker"]) for a in reply.json()["attempts"]]
            await trio.sleep(0.05)
    assert history == [
        (1, "lost", executor.worker_id),
        (2, "completed", replacement.worker_id),
    ]
    docs = await cluster.db(lambda jobs: list(jobs.find({"idempotencyKey": job["idempotencyKey"]})))
    assert [d["status"] for d in docs] == ["completed"]
    assert await reaper.metric(cluster.http, "reaper_recovered_jobs_total", sweep="claimed") == 1


async def test_queued_job_whose_wake_up_was_lost_is_re_pended_and_completes(
    cluster: Cluster,
) -> None:
    api, reaper, scheduler, _executor = await cluster.start_all(
        ("api", {}),
        ("reaper", {"QUEUED_TIMEOUT": "1s", "REAPER_INTERVAL": "200ms"}),
        ("scheduler", {}),
        ("executor", {"JOB_TYPE": "noop"}),
    )
    await cluster.leader([scheduler])
    job = await cluster.create_job(api, scheduledAt=FAR_FUTURE)
    now = utc_now()
    # As if the scheduler had claimed it 5 s ago and its wake-up never reached Kafka.
    result = await cluster.db(
        lambda jobs: jobs.update_one(
            {"idempotencyKey": job["idempotencyKey"], "status": "pending"},
            {
                "$set": {
                    "status": "queued",
                    "queuedAt": now - timedelta(seconds=5),
                    "scheduledAt": now - timedelta(seconds=10),
                    "updatedAt": now - timedelta(seconds=5),
                }
            },
        )
    )
    assert result.modified_count == 1

    done = await cluster.wait_job(api, job["id"], lambda j: j["status"] == "completed")
    assert done["attempts"] == 1  # recovery from queued cost no attempt
    assert "lastError" not in done
    recovered = await reaper.metric(cluster.http, "reaper_recovered_jobs_total", sweep="queued")
    assert recovered is not None
    assert recovered >= 1
    assert job["id"] in reaper.log()


# --------------------------------------------------------------------------- failover


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
    key, lease, value = found
    assert value.decode() == leader.worker_id
    assert key.decode() == f"{cluster.election_name}/{lease:x}"

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
    assert found[2].decode() == standby.worker_id
    assert found[1] != lease


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
    second_fire = first_fire + timedelta(minutes=1)

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

    until_first = (first_fire - utc_now()).total_seconds()
    first_instance = await wait_instance(first_fire, timeout=until_first + 20)
    assert first_instance["scheduledAt"] == first_fire

    # Kill whoever leads about 5 s before the next fire time: the standby takes over only
    # after the lease expires, past that fire time, and must still fire it exactly once.
    await trio.sleep(max(0.0, (second_fire - utc_now()).total_seconds() - 5))
    leader, (standby,) = await cluster.leader([first, second])
    leader.kill()
    second_instance = await wait_instance(second_fire, timeout=ELECTION_TTL + 30)
    late = (second_instance["createdAt"] - second_fire).total_seconds()
    print(f"cron: fire time {second_fire:%H:%M:%S} spawned {late:.2f}s late by the new leader")
    assert await standby.is_leader(cluster.http)
    assert second_instance["scheduledAt"] == second_fire

    prefix = f"{template_key}-run-"
    keys = await cluster.db(
        lambda jobs: [
            d["idempotencyKey"]
            for d in jobs.find({"idempotencyKey": {"$regex": f"^{prefix}"}}, {"idempotencyKey": 1})
        ]
    )
    per_key = Counter(keys)
    assert per_key[instance_key(first_fire)] == 1
    assert per_key[instance_key(second_fire)] == 1
    assert all(count == 1 for count in per_key.values()), per_key
    for key in per_key:  # every instance belongs to a minute boundary
        assert int(key.removeprefix(prefix)) % (60 * 10**9) == 0, key
    stored_template = await cluster.db(lambda jobs: jobs.find_one({"idempotencyKey": template_key}))
    assert stored_template["status"] == "pending"
    assert stored_template["scheduledAt"] > second_fire

    # The ledger shows each fire time once, the one before the kill and the one the new
    # leader fired alike, and names the very run spawned for it.
    reply = await cluster.http.get(
        f"{api.url}/jobs/{template['id']}/occurrences", params={"limit": "500"}
    )
    assert reply.status_code == 200, reply.text
    items = reply.json()["occurrences"]
    fire_times = [parse_time(item["fireAt"]) for item in items]
    assert len(fire_times) == len(set(fire_times)), fire_times
    assert sorted(fire_times) == [first_fire + timedelta(minutes=m) for m in range(len(items))]
    by_fire = dict(zip(fire_times, items, strict=True))
    for fire, instance in ((first_fire, first_instance), (second_fire, second_instance)):
        assert by_fire[fire]["status"] == "spawned"
        assert by_fire[fire]["runId"] == str(instance["_id"])
        assert by_fire[fire]["run"]["status"] == "completed"
    print(f"cron ledger: {second_fire:%H:%M:%S} late by {by_fire[second_fire]['lateSeconds']}s")
