"""The notifier role on the memory store: a dead-lettered job's event becomes one delivery
per subscribed webhook of its tenant, sent signed through the address guard (a real local
receiver, allowlisted), retried with backoff, given up when refused, when its tries run
out or when its webhook is gone; and a restart in the middle loses nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
import trio
import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.notifications import (
    MAX_DELIVERY_ATTEMPTS,
    SIGNATURE_HEADER,
    Delivery,
    DeliveryStatus,
    EventType,
    Webhook,
    new_webhook,
    verify_signature,
)
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.notifier.loop import LEASE, Notifier
from jobscheduler.roles.notifier.sender import TryResult, WebhookSender
from jobscheduler.store import JobStore
from tests.support.receiver import Receiver, receiver

from .conftest import BASE, DepsFactory, make_job, sample


class FakeSender(WebhookSender):
    """Answers each try from ``results`` in turn (then 200), recording what it was given."""

    def __init__(self, *results: TryResult) -> None:
        super().__init__()
        self.results = list(results)
        self.sent: list[tuple[Webhook, Delivery, int]] = []

    async def send(self, webhook: Webhook, delivery: Delivery, *, now: int) -> TryResult:
        await trio.lowlevel.checkpoint()
        self.sent.append((webhook, delivery, now))
        return self.results.pop(0) if self.results else TryResult(200)


async def dead_letter(store: JobStore, *, tenant: str = "tenant-a", **kwargs: object) -> Job:
    """A job of ``tenant`` that just reached dlq (its events written with it)."""
    job = make_job(tenant=tenant, max_attempts=1, **kwargs)  # type: ignore[arg-type]
    await store.insert(job)
    await store.claim_due(BASE + timedelta(days=1), 100)
    await store.apply(states.pick(job.id, worker="w", token="t", now=BASE))
    running = await store.apply(states.start(job.id, token="t", now=BASE))
    assert running is not None
    dead = await store.apply(states.fail(running, token="t", now=BASE, error="boom"))
    assert dead is not None
    assert dead.status is Status.DLQ
    return dead


async def register(
    store: JobStore, url: str, *events: EventType, tenant: str = "tenant-a"
) -> Webhook:
    hook = new_webhook(tenant_id=tenant, url=url, events=events or (EventType.JOB_DLQ,), now=BASE)
    return await store.insert_webhook(hook)


async def dead_letter_for_one_webhook(store: JobStore) -> Webhook:
    """One webhook of tenant-a on job.dlq, and then a job of tenant-a that reaches dlq."""
    hook = await register(store, "https://a.example/dlq")
    await dead_letter(store)
    return hook


async def the_delivery(store: JobStore, hook: Webhook) -> Delivery:
    """The webhook's one delivery as the store holds it now."""
    [delivery] = await store.list_deliveries(hook.id, limit=1)
    return delivery


class HangingSender(FakeSender):
    """Its try never ends (a notifier killed mid-send)."""

    async def send(self, webhook: Webhook, delivery: Delivery, *, now: int) -> TryResult:
        await trio.sleep_forever()
        raise AssertionError


class BrokenSender(FakeSender):
    """Its try raises what no sender expects."""

    async def send(self, webhook: Webhook, delivery: Delivery, *, now: int) -> TryResult:
        raise UnicodeError("label too long")


async def test_a_dead_letter_is_delivered_once_to_each_subscribed_webhook_of_its_tenant(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    dlq_hook = await register(store, "https://a.example/dlq")
    both = await register(
        store, "https://a.example/both", EventType.JOB_DLQ, EventType.TEMPLATE_RUN_FAILED
    )
    await register(store, "https://a.example/workflows", EventType.WORKFLOW_FAILED)
    await register(store, "https://b.example/dlq", tenant="tenant-b")
    dead = await dead_letter(store, template_id="f" * 24)
    sender = FakeSender()
    notifier = Notifier(deps, sender)

    assert await notifier.run_pass() == 2 + 3  # two events; three deliveries
    sent = sorted((hook.url, delivery.event_type.value) for hook, delivery, _ in sender.sent)
    assert sent == [
        ("https://a.example/both", "job.dlq"),
        ("https://a.example/both", "template.run_failed"),
        ("https://a.example/dlq", "job.dlq"),
    ]
    body = json.loads(sender.sent[0][1].body)
    assert body["tenantId"] == "tenant-a"
    assert body["data"].get("job", body["data"].get("run"))["id"] == dead.id
    assert await notifier.run_pass() == 0  # nothing twice
    [delivered] = await store.list_deliveries(dlq_hook.id, limit=10)
    assert delivered.status is DeliveryStatus.DELIVERED
    assert len(await store.list_deliveries(both.id, limit=10)) == 2
    assert sample(deps.metrics, "notifier_deliveries_total", {"result": "delivered"}) == 3


async def test_a_failed_try_is_retried_after_its_backoff_until_it_is_delivered(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    hook = await dead_letter_for_one_webhook(store)
    sender = FakeSender(TryResult(503, "answered 503"), TryResult(None, "connection refused"))
    notifier = Notifier(deps, sender)

    await notifier.run_pass()
    first = await the_delivery(store, hook)
    assert (first.status, first.attempts, first.last_status) == (DeliveryStatus.PENDING, 1, 503)
    await trio.sleep(4.9)
    await notifier.run_pass()
    assert len(sender.sent) == 1  # not before its backoff
    await trio.sleep(0.2)
    await notifier.run_pass()
    second = await the_delivery(store, hook)
    assert (second.attempts, second.last_error) == (2, "connection refused")
    await trio.sleep(10)
    await notifier.run_pass()
    done = await the_delivery(store, hook)
    assert (done.status, done.attempts) == (DeliveryStatus.DELIVERED, 3)
    assert [d.id for _, d, _ in sender.sent] == [done.id] * 3  # the same delivery id each time
    assert sample(deps.metrics, "notifier_deliveries_total", {"result": "retried"}) == 2


async def test_a_delivery_is_given_up_when_its_tries_run_out(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    hook = await dead_letter_for_one_webhook(store)
    sender = FakeSender(*[TryResult(500, "answered 500")] * MAX_DELIVERY_ATTEMPTS)
    notifier = Notifier(make_deps(), sender)
    for _ in range(MAX_DELIVERY_ATTEMPTS + 2):
        await notifier.run_pass()
        await trio.sleep(3600)
    failed = await the_delivery(store, hook)
    assert (failed.status, failed.attempts) == (DeliveryStatus.FAILED, MAX_DELIVERY_ATTEMPTS)
    assert len(sender.sent) == MAX_DELIVERY_ATTEMPTS


async def test_a_deleted_webhooks_pending_deliveries_are_given_up_unsent(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    hook = await dead_letter_for_one_webhook(store)
    sender = FakeSender(TryResult(500, "answered 500"))
    notifier = Notifier(make_deps(), sender)
    await notifier.run_pass()
    await store.delete_webhook(hook.id)
    await trio.sleep(60)
    await notifier.run_pass()
    given_up = await the_delivery(store, hook)
    assert (given_up.status, given_up.last_error) == (
        DeliveryStatus.FAILED,
        "the webhook was deleted",
    )
    assert len(sender.sent) == 1


async def test_a_notifier_that_dies_mid_send_leaves_the_delivery_to_the_next_one(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    hook = await dead_letter_for_one_webhook(store)
    with trio.move_on_after(5):  # "killed" while its try hangs, nothing written
        await Notifier(deps, HangingSender()).run_pass()
    claimed = await the_delivery(store, hook)
    assert (claimed.status, claimed.attempts) == (DeliveryStatus.PENDING, 0)

    restarted = FakeSender()
    await Notifier(deps, restarted).run_pass()
    assert restarted.sent == []  # still under the dead one's lease
    await trio.sleep(LEASE.total_seconds())
    await Notifier(deps, restarted).run_pass()
    delivered = await the_delivery(store, hook)
    assert delivered.status is DeliveryStatus.DELIVERED
    assert len(restarted.sent) == 1


async def test_an_unexpected_error_in_a_try_is_a_failed_try_not_the_end_of_the_role(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    hook = await dead_letter_for_one_webhook(store)
    assert await Notifier(make_deps(), BrokenSender()).run_pass() == 2  # an event, a delivery tried
    retried = await the_delivery(store, hook)
    assert (retried.status, retried.attempts) == (DeliveryStatus.PENDING, 1)
    assert retried.last_error == "UnicodeError: label too long"


# ----------------------------------------------------------------------- the real sender


@pytest.fixture
async def local() -> AsyncIterator[Receiver]:
    async with receiver() as running:
        yield running


async def one_delivery(make_deps: DepsFactory, store: JobStore, url: str) -> tuple[Deps, Webhook]:
    deps = make_deps()
    hook = await register(store, url)
    await dead_letter(store)
    return deps, hook


async def test_a_delivery_is_a_signed_json_post_to_an_allowlisted_local_receiver(
    make_deps: DepsFactory, store: JobStore, local: Receiver
) -> None:
    deps, hook = await one_delivery(make_deps, store, f"{local.base}/hooks/dlq?token=abc")
    sender = WebhookSender.from_allowlist(("127.0.0.1",))
    await Notifier(deps, sender).run_pass()
    [request] = local.requests
    delivery = await the_delivery(store, hook)
    assert delivery.status is DeliveryStatus.DELIVERED
    assert (request.method, request.path) == ("POST", "/hooks/dlq")
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-jobscheduler-event"] == "job.dlq"
    assert request.headers["x-jobscheduler-delivery"] == delivery.id
    header = request.headers[SIGNATURE_HEADER.lower()]
    timestamp = int(header.split(",")[0].removeprefix("t="))
    assert verify_signature(hook.secret, header, request.body, now=timestamp)
    assert not verify_signature("whsec_wrong", header, request.body, now=timestamp)
    assert json.loads(request.body)["type"] == "job.dlq"


async def test_an_internal_address_not_allowlisted_is_refused_unsent_and_given_up(
    make_deps: DepsFactory, store: JobStore, local: Receiver
) -> None:
    deps, hook = await one_delivery(make_deps, store, f"{local.base}/hooks/dlq")
    await Notifier(deps, WebhookSender.from_allowlist(())).run_pass()
    assert local.requests == []
    refused = await the_delivery(store, hook)
    assert refused.status is DeliveryStatus.FAILED
    assert refused.attempts == 1
    assert refused.last_error is not None
    assert "loopback" in refused.last_error
    assert "HTTP_ALLOWLIST" in refused.last_error


async def test_cloud_metadata_is_refused_even_with_loopback_allowlisted(
    make_deps: DepsFactory, store: JobStore
) -> None:
    deps, hook = await one_delivery(make_deps, store, "http://169.254.169.254/latest/meta-data/")
    await Notifier(deps, WebhookSender.from_allowlist(("127.0.0.1",))).run_pass()
    refused = await the_delivery(store, hook)
    assert refused.status is DeliveryStatus.FAILED
    assert "link-local" in (refused.last_error or "")


async def test_a_non_2xx_answer_is_a_failed_try_to_retry(
    make_deps: DepsFactory, store: JobStore, local: Receiver
) -> None:
    local.statuses = [500]
    deps, hook = await one_delivery(make_deps, store, f"{local.base}/hooks/dlq")
    await Notifier(deps, WebhookSender.from_allowlist(("127.0.0.1",))).run_pass()
    retried = await the_delivery(store, hook)
    assert (retried.status, retried.last_status) == (DeliveryStatus.PENDING, 500)
    assert retried.last_error == f"{local.base}/hooks/dlq answered 500"
