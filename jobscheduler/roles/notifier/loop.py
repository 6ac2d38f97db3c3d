"""The notifier role: expand new events into deliveries, send the deliveries that are due,
write how each try went. It runs in the reaper's process (``run-reaper``) and in ``dev``.

Each pass:

1. events not yet expanded (written by the transitions that dead-lettered jobs) become one
   delivery per webhook of their tenant subscribed to their type, then are marked expanded
   (a crash in between expands again: delivery ids are ``<event>.<webhook>``, so nothing is
   doubled);
2. due deliveries are claimed with a lease (:data:`LEASE`): several notifiers never send
   one twice at once, and one that dies lets its claims come due again when the lease ends;
3. each is sent (:mod:`.sender`, at most :data:`CONCURRENCY` at once) and its result written
   under its claim: delivered, retried after a backoff, or failed once its tries ran out,
   its address was refused, or its webhook was deleted.

Everything is in the store, so a restart loses nothing: what was claimed and not written
comes due again after the lease. Delivery is at least once (a receiver that answered but
whose answer was lost gets the delivery again, with the same ``X-Jobscheduler-Delivery``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta

import trio

from jobscheduler.domain.notifications import (
    Delivery,
    DeliveryStatus,
    Event,
    Webhook,
    after_try,
    delivery_of,
    subscribers,
)
from jobscheduler.errors import StoreError
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.retention import prune_older_than

from .sender import TryResult, WebhookSender

log = logging.getLogger(__name__)

#: Events expanded, and deliveries claimed, per round trip.
BATCH = 100
#: Deliveries sent at once.
CONCURRENCY = 8
#: How long a claimed delivery is this notifier's (longer than a try's bound).
LEASE = timedelta(seconds=60)
#: How often finished deliveries and expanded events older than the retention are pruned.
PRUNE_EVERY = 300.0


class Notifier:
    def __init__(self, deps: Deps, sender: WebhookSender) -> None:
        self._deps = deps
        self._sender = sender
        self._pruned_at: float | None = None

    async def expand(self) -> int:
        """Turn the events not yet expanded into deliveries; returns how many events."""
        store = self._deps.store
        events = await store.pending_events(BATCH)
        hooks: dict[str, list[Webhook]] = {}
        for event in events:
            if event.tenant_id not in hooks:
                hooks[event.tenant_id] = await store.list_webhooks(event.tenant_id)
            await self._dispatch(event, hooks[event.tenant_id])
        return len(events)

    async def _dispatch(self, event: Event, hooks: Sequence[Webhook]) -> None:
        now = self._deps.clock.now()
        deliveries = [delivery_of(event, hook, now) for hook in subscribers(event, hooks)]
        await self._deps.store.dispatch_event(event.id, deliveries)
        if deliveries:
            log.info(
                "event to deliver",
                extra={
                    "event_id": event.id,
                    "event_type": event.type.value,
                    "tenant": event.tenant_id,
                    "webhooks": len(deliveries),
                },
            )

    async def send_due(self) -> int:
        """Claim the due deliveries and send them; returns how many were tried."""
        deps = self._deps
        now = deps.clock.now()
        claimed = await deps.store.claim_deliveries(now, now + LEASE, BATCH)
        if not claimed:
            return 0
        hooks: dict[str, Webhook | None] = {}
        for delivery in claimed:
            if delivery.webhook_id not in hooks:
                hooks[delivery.webhook_id] = await deps.store.get_webhook(delivery.webhook_id)
        limit = trio.CapacityLimiter(CONCURRENCY)
        async with trio.open_nursery() as nursery:
            for delivery in claimed:
                nursery.start_soon(self._try, delivery, hooks[delivery.webhook_id], limit)
        return len(claimed)

    async def _try(
        self, delivery: Delivery, webhook: Webhook | None, limit: trio.CapacityLimiter
    ) -> None:
        deps = self._deps
        status: int | None
        error: str | None
        async with limit:
            if webhook is None:
                status, error, permanent = None, "the webhook was deleted", True
            else:
                sent_at = int(deps.clock.now().timestamp())
                try:
                    result = await self._sender.send(webhook, delivery, now=sent_at)
                except Exception as exc:
                    # A receiver's URL or answer no one foresaw is one failed try, retried
                    # as any other, never the end of the role (and of the reaper with it).
                    log.exception(
                        "webhook try failed unexpectedly", extra={"delivery_id": delivery.id}
                    )
                    result = TryResult(None, f"{type(exc).__name__}: {exc}")
                status, error, permanent = result.status, result.error, result.permanent
        after = after_try(
            delivery, now=deps.clock.now(), status=status, error=error, permanent=permanent
        )
        try:
            written = await deps.store.settle_delivery(delivery, after)
        except StoreError as exc:
            # Unwritten: the delivery comes due again when its lease ends (sent once more).
            log.warning(
                "delivery result not written", extra={"delivery_id": delivery.id, "error": str(exc)}
            )
            return
        if written is None:
            log.debug("delivery changed under its claim", extra={"delivery_id": delivery.id})
            return
        result_label = {
            DeliveryStatus.DELIVERED: "delivered",
            DeliveryStatus.PENDING: "retried",
            DeliveryStatus.FAILED: "failed",
        }[written.status]
        deps.metrics.notifier_deliveries.labels(result=result_label).inc()
        fields = {
            "delivery_id": delivery.id,
            "webhook_id": delivery.webhook_id,
            "tenant": delivery.tenant_id,
            "event_type": delivery.event_type.value,
            "attempts": written.attempts,
            "status": status,
        }
        if written.status is DeliveryStatus.DELIVERED:
            log.info("webhook delivered", extra=fields)
        elif written.status is DeliveryStatus.FAILED:
            log.warning("webhook delivery given up", extra={**fields, "error": error})
        else:
            log.info(
                "webhook delivery failed; will retry",
                extra={**fields, "error": error, "retry_at": written.next_attempt_at.isoformat()},
            )

    async def prune(self) -> None:
        """Delete finished deliveries and expanded events past NOTIFICATION_RETENTION, at
        most every PRUNE_EVERY seconds (a failure is logged; the next pass tries again)."""
        now = trio.current_time()
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY:
            return
        self._pruned_at = now
        deps = self._deps
        await prune_older_than(
            deps,
            deps.settings.notification_retention,
            deps.store.prune_notifications,
            "notifications",
        )

    async def run_pass(self) -> int:
        """One pass (expand, send, prune); returns how much it did."""
        done = await self.expand()
        done += await self.send_due()
        await self.prune()
        return done


async def run_notifier(
    deps: Deps,
    sender: WebhookSender | None = None,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The notifier role: a pass every NOTIFY_INTERVAL (at once again after a pass that did
    something), until cancelled; a failing store is logged and retried."""
    notifier = Notifier(deps, sender or WebhookSender.from_allowlist(deps.settings.http_allowlist))
    task_status.started()
    while True:
        try:
            busy = await notifier.run_pass()
        except StoreError as exc:
            log.error("notifier pass failed", extra={"error": str(exc)})
            busy = 0
        if not busy:
            await trio.sleep(deps.settings.notify_interval)
