"""The JobStore contract of notifications, on every adapter: webhooks per tenant; the events
a job's move to dlq writes with it (and only if it applies); their expansion into
deliveries, which a repeat does not double; deliveries claimed once by concurrent callers,
settled only under the claim that took them, listed newest first, pruned once finished."""

from __future__ import annotations

from datetime import timedelta

import trio

from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.domain.notifications import (
    Delivery,
    DeliveryStatus,
    EventType,
    after_try,
    delivery_of,
    new_webhook,
)
from jobscheduler.store import JobStore

from .store_support import NOW, running_job

LEASE = NOW + timedelta(seconds=30)


async def test_webhooks_are_kept_per_tenant_and_deleted_once(store: JobStore) -> None:
    first = new_webhook(
        tenant_id="tenant-a",
        url="https://a.example/1",
        events=[EventType.JOB_DLQ, EventType.TEMPLATE_RUN_FAILED],
        now=NOW,
        name="first",
    )
    second = new_webhook(
        tenant_id="tenant-a", url="https://a.example/2", events=[EventType.JOB_DLQ], now=NOW
    )
    other = new_webhook(
        tenant_id="tenant-b", url="https://b.example", events=[EventType.JOB_DLQ], now=NOW
    )
    for webhook in (first, second, other):
        await store.insert_webhook(webhook)
    assert [w.id for w in await store.list_webhooks("tenant-a")] == sorted([first.id, second.id])
    assert {w.id for w in await store.list_webhooks(None)} == {first.id, second.id, other.id}
    assert await store.get_webhook(first.id) == first
    assert await store.get_webhook(first.id, tenant="tenant-b") is None
    assert await store.delete_webhook(first.id, tenant="tenant-b") is None
    assert await store.delete_webhook(first.id, tenant="tenant-a") == first
    assert await store.delete_webhook(first.id) is None
    assert await store.get_webhook(first.id) is None


async def test_a_failure_that_dead_letters_writes_its_events_with_it(store: JobStore) -> None:
    running = await running_job(store, max_attempts=1)
    stale = states.fail(running, token="not-the-token", now=NOW, error="boom")
    assert await store.apply(stale) is None
    assert await store.pending_events(10) == []  # a transition that lost writes nothing

    change = states.fail(running, token="tok-1", now=NOW, error="boom")
    dead = await store.apply(change)
    assert dead is not None
    assert dead.status is Status.DLQ
    [event] = await store.pending_events(10)
    assert event.type is EventType.JOB_DLQ
    assert event.tenant_id == running.tenant_id
    assert event.data["job"]["id"] == running.id
    assert event.data["job"]["lastError"] == "boom"
    assert event == change.events[0]
    await store.record_events(change.events)  # a writer that learns late: no second copy
    assert len(await store.pending_events(10)) == 1


async def test_a_retried_failure_writes_no_event(store: JobStore) -> None:
    running = await running_job(store, max_attempts=3)
    applied = await store.apply_many_lean(
        [states.fail(running, token="tok-1", now=NOW, error="boom")], [False]
    )
    assert applied == [True]
    assert await store.pending_events(10) == []


async def test_dead_letters_through_lean_batches_write_their_events(store: JobStore) -> None:
    running = await running_job(store, max_attempts=1)
    change = states.fail(running, token="tok-1", now=NOW, error="boom")
    assert await store.apply_many_lean([change], [False]) == [True]
    assert [e.id for e in await store.pending_events(10)] == [change.events[0].id]


async def test_dispatching_an_event_twice_stores_each_delivery_once(store: JobStore) -> None:
    running = await running_job(store, max_attempts=1)
    change = states.fail(running, token="tok-1", now=NOW, error="boom")
    await store.apply(change)
    [event] = await store.pending_events(10)
    webhook = new_webhook(
        tenant_id=event.tenant_id, url="https://x.example", events=[event.type], now=NOW
    )
    await store.insert_webhook(webhook)
    delivery = delivery_of(event, webhook, NOW)
    await store.dispatch_event(event.id, [delivery])
    await store.dispatch_event(event.id, [delivery])
    assert await store.pending_events(10) == []
    assert await store.list_deliveries(webhook.id, limit=10) == [delivery]
    assert await store.list_deliveries(webhook.id, limit=10, tenant="tenant-b") == []


async def make_deliveries(store: JobStore, count: int) -> list[Delivery]:
    running = await running_job(store, max_attempts=1)
    change = states.fail(running, token="tok-1", now=NOW, error="boom")
    await store.apply(change)
    [event] = await store.pending_events(10)
    hooks = [
        new_webhook(
            tenant_id=event.tenant_id,
            url=f"https://x.example/{i}",
            events=[event.type],
            now=NOW + timedelta(seconds=i),
        )
        for i in range(count)
    ]
    deliveries = [delivery_of(event, h, NOW + timedelta(seconds=i)) for i, h in enumerate(hooks)]
    await store.dispatch_event(event.id, deliveries)
    return deliveries


async def test_due_deliveries_are_claimed_once_however_many_claim(store: JobStore) -> None:
    await make_deliveries(store, 6)
    claims: list[list[str]] = []

    async def claim() -> None:
        claimed = await store.claim_deliveries(NOW + timedelta(seconds=10), LEASE, 4)
        claims.append([d.id for d in claimed])

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(claim)
    # A caller may come back with fewer than are due (others took them meanwhile), never
    # with one another caller took.
    while rest := await store.claim_deliveries(NOW + timedelta(seconds=10), LEASE, 10):
        claims.append([d.id for d in rest])
    taken = [d for c in claims for d in c]
    assert len(taken) == len(set(taken)) == 6
    # the lease runs out: due again
    assert len(await store.claim_deliveries(LEASE, LEASE + timedelta(seconds=30), 10)) == 6


async def test_only_due_deliveries_are_claimed_oldest_first(store: JobStore) -> None:
    await make_deliveries(store, 3)
    claimed = await store.claim_deliveries(NOW + timedelta(seconds=1), LEASE, 10)
    assert len(claimed) == 2
    assert all(d.next_attempt_at == LEASE for d in claimed)


async def test_a_try_is_written_only_under_the_claim_that_took_it(store: JobStore) -> None:
    [delivery] = await make_deliveries(store, 1)
    [claimed] = await store.claim_deliveries(NOW, LEASE, 1)
    later = NOW + timedelta(seconds=1)
    retried = after_try(claimed, now=later, status=503, error=None)
    written = await store.settle_delivery(claimed, retried)
    assert written == retried
    assert written.status is DeliveryStatus.PENDING
    assert written.attempts == 1
    assert written.last_status == 503
    assert written.next_attempt_at == later + timedelta(seconds=5)
    # the same claim again (a zombie's late answer): refused
    late = after_try(claimed, now=later, status=200, error=None)
    assert await store.settle_delivery(claimed, late) is None
    [again] = await store.claim_deliveries(written.next_attempt_at, LEASE, 1)
    done = await store.settle_delivery(again, after_try(again, now=LEASE, status=204, error=None))
    assert done is not None
    assert done.status is DeliveryStatus.DELIVERED
    assert done.delivered_at == LEASE
    assert done.attempts == 2
    assert await store.claim_deliveries(LEASE + timedelta(days=1), LEASE, 10) == []
    [listed] = await store.list_deliveries(delivery.webhook_id, limit=5)
    assert listed == done


async def test_finished_deliveries_and_expanded_events_are_pruned(store: JobStore) -> None:
    first, second = await make_deliveries(store, 2)
    claimed = await store.claim_deliveries(NOW + timedelta(seconds=5), LEASE, 10)
    by_id = {d.id: d for d in claimed}
    done = by_id[first.id]
    await store.settle_delivery(done, after_try(done, now=NOW, status=200, error=None))
    assert await store.prune_notifications(NOW) == 0
    pruned = await store.prune_notifications(NOW + timedelta(days=1))
    assert pruned == 2  # the expanded event and the delivered delivery; the pending one stays
    assert [d.id for d in await store.list_deliveries(second.webhook_id, limit=5)] == [second.id]
