"""Jobs through the roles as separate processes on MongoDB (FerretDB), Kafka and etcd.

Every test starts ``jobscheduler run-<role>`` subprocesses (see ``conftest.py``) and drives
them through the HTTP API, the database, the metrics listener and Kafka: idempotent
creation, retry and dead-lettering, end-to-end completion and the reaper's two recoveries
(the job of a killed executor, a queued job whose wake-up was lost). The scheduler's
leadership (failover, cron across a leader crash) is in ``test_leadership_distributed.py``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, KafkaError

from jobscheduler.bus.base import dlq_topic
from tests.integration.conftest import (
    Cluster,
    kafka_brokers,
    metric_value,
    parse_time,
    utc_now,
)

pytestmark = pytest.mark.integration

FAR_FUTURE = "2099-01-01T00:00:00Z"


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
    (jobscheduler/process/assembly.py) the front nursery holds only the api, scheduler and reaper
    roles; in an executor-only process it is empty, exits at once, and the ``drain.set()`` after
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
