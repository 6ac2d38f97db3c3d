"""Failure notifications, the pure part: which transitions make which events, how a
delivery is signed (and how a receiver checks it), and how its tries back off and end."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.domain.notifications import (
    MAX_DELIVERY_ATTEMPTS,
    DeliveryStatus,
    EventType,
    after_try,
    delivery_backoff,
    delivery_of,
    new_webhook,
    signature,
    subscribers,
    verify_signature,
    workflow_failed,
)

from .conftest import make_job

NOW = datetime(2026, 9, 29, 18, 0, tzinfo=UTC)


def running(**kwargs: object) -> object:
    job = make_job(**kwargs)  # type: ignore[arg-type]
    return attrs.evolve(
        job, status=Status.RUNNING, attempts=1, claim_token="tok", claimed_by="w", claimed_at=NOW
    )


def test_a_failure_that_dead_letters_carries_a_job_dlq_event_and_a_retry_none() -> None:
    last = running(max_attempts=1)
    dead = states.fail(last, token="tok", now=NOW, error="boom")  # type: ignore[arg-type]
    [event] = dead.events
    assert event.type is EventType.JOB_DLQ
    assert event.data["job"]["status"] == "dlq"
    assert event.data["job"]["lastError"] == "boom"
    assert "payload" not in event.data["job"]
    retried = states.fail(running(max_attempts=3), token="tok", now=NOW, error="boom")  # type: ignore[arg-type]
    assert retried.events == ()


def test_a_cron_runs_dead_letter_also_reports_the_templates_run_failure() -> None:
    run = running(max_attempts=1, template_id="t" * 24)
    change = states.fail(run, token="tok", now=NOW, error="boom", permanent=True)  # type: ignore[arg-type]
    assert [e.type for e in change.events] == [EventType.JOB_DLQ, EventType.TEMPLATE_RUN_FAILED]
    assert change.events[1].data["template"] == {"id": "t" * 24}


def test_a_lost_job_out_of_attempts_and_a_dead_template_report_job_dlq() -> None:
    lost = attrs.evolve(running(max_attempts=1), heartbeat_at=NOW)
    assert [e.type for e in states.recover(lost, now=NOW).events] == [EventType.JOB_DLQ]  # type: ignore[arg-type]
    template = make_job(cron="*/5 * * * *")
    change = states.dead_letter_template(template, error="bad", now=NOW)
    assert [e.type for e in change.events] == [EventType.JOB_DLQ]
    assert change.events[0].data["job"]["cron"] == "*/5 * * * *"


def test_the_workflow_failed_event_names_the_workflow_and_the_failed_step() -> None:
    step = attrs.evolve(make_job(), status=Status.DLQ, last_error="boom")
    event = workflow_failed(
        workflow_id="w1", tenant_id="tenant-a", failed_step=step, now=NOW, key="nightly"
    )
    body = json.loads(event.body())
    assert body["type"] == "workflow.failed"
    assert body["data"] == {
        "workflow": {"id": "w1", "idempotencyKey": "nightly"},
        "failedStep": {
            "id": step.id,
            "idempotencyKey": step.idempotency_key,
            "jobType": "noop",
            "status": "dlq",
            "attempts": 0,
            "maxAttempts": 3,
            "lastError": "boom",
        },
    }


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body() -> None:
    body = b'{"type":"job.dlq"}'
    header = signature("whsec_abc", 1700000000, body)
    expected = hmac.new(b"whsec_abc", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"


def test_a_receiver_accepts_the_signature_and_refuses_tampering_staleness_and_other_keys() -> None:
    body = b'{"a":1}'
    header = signature("whsec_abc", 1000, body)
    assert verify_signature("whsec_abc", header, body, now=1000 + 299)
    assert not verify_signature("whsec_abc", header, b'{"a":2}', now=1000)
    assert not verify_signature("whsec_other", header, body, now=1000)
    assert not verify_signature("whsec_abc", header, body, now=1000 + 301)
    assert not verify_signature("whsec_abc", "v1=deadbeef", body, now=1000)


def test_backoff_doubles_from_five_seconds_up_to_an_hour() -> None:
    waits = [delivery_backoff(n).total_seconds() for n in range(1, 12)]
    assert waits[:5] == [5, 10, 20, 40, 80]
    assert max(waits) == 3600
    assert waits == sorted(waits)


def delivery() -> object:
    dead = states.fail(running(max_attempts=1), token="tok", now=NOW, error="x")  # type: ignore[arg-type]
    hook = new_webhook(tenant_id="tenant-a", url="https://x", events=[EventType.JOB_DLQ], now=NOW)
    return delivery_of(dead.events[0], hook, NOW)


def test_a_2xx_delivers_anything_else_is_retried_until_the_tries_run_out() -> None:
    pending = delivery()
    done = after_try(pending, now=NOW, status=202, error=None)  # type: ignore[arg-type]
    assert (done.status, done.attempts, done.delivered_at) == (DeliveryStatus.DELIVERED, 1, NOW)
    tried = pending
    for n in range(1, MAX_DELIVERY_ATTEMPTS):
        tried = after_try(tried, now=NOW, status=500, error=None)  # type: ignore[arg-type]
        assert tried.status is DeliveryStatus.PENDING
        assert tried.next_attempt_at == NOW + delivery_backoff(n)
        assert tried.last_error == "answered 500"
    last = after_try(tried, now=NOW, status=None, error="connection refused")  # type: ignore[arg-type]
    assert (last.status, last.attempts) == (DeliveryStatus.FAILED, MAX_DELIVERY_ATTEMPTS)
    assert last.last_error == "connection refused"


def test_a_permanent_failure_gives_up_at_once() -> None:
    refused = after_try(delivery(), now=NOW, status=None, error="refused", permanent=True)  # type: ignore[arg-type]
    assert (refused.status, refused.attempts) == (DeliveryStatus.FAILED, 1)


def test_only_the_tenants_webhooks_subscribed_to_the_type_hear_an_event() -> None:
    dead = states.fail(running(max_attempts=1), token="tok", now=NOW, error="x")  # type: ignore[arg-type]
    [event] = dead.events
    mine = new_webhook(tenant_id="tenant-a", url="https://a", events=[EventType.JOB_DLQ], now=NOW)
    other_type = new_webhook(
        tenant_id="tenant-a", url="https://b", events=[EventType.WORKFLOW_FAILED], now=NOW
    )
    other_tenant = new_webhook(
        tenant_id="tenant-b", url="https://c", events=[EventType.JOB_DLQ], now=NOW
    )
    assert subscribers(event, [mine, other_type, other_tenant]) == [mine]
    assert delivery_of(event, mine, NOW).id == f"{event.id}.{mine.id}"
    assert mine.secret.startswith("whsec_")
    assert "secret" not in mine.to_json()
    assert mine.to_json(with_secret=True)["secret"] == mine.secret
    assert timedelta(0) < delivery_backoff(1)
