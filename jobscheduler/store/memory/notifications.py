"""The memory store's notifications: webhooks, events (written with the transitions that
report them, see :mod:`.store`) and deliveries, each table a dict."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import attrs

from jobscheduler.domain.model import utc
from jobscheduler.domain.notifications import Delivery, DeliveryStatus, Event, Webhook

from .codec import insert_new, keep
from .conn import MemoryConnection


class EventLog:
    """Events by id (the first record of an id kept) and which were expanded when."""

    def __init__(self) -> None:
        self.events: dict[str, Event] = {}
        self.dispatched: dict[str, datetime] = {}

    def add(self, events: Sequence[Event]) -> None:
        for event in events:
            self.events.setdefault(event.id, keep(event))


class MemoryNotificationsMixin(MemoryConnection):
    """Webhooks, events and deliveries beside the jobs."""

    def __init__(self) -> None:
        super().__init__()
        self._webhooks: dict[str, Webhook] = {}
        self._events = EventLog()
        self._deliveries: dict[str, Delivery] = {}

    async def insert_webhook(self, webhook: Webhook) -> Webhook:
        await self._enter()
        return insert_new(self._webhooks, webhook.id, webhook, "webhook")

    async def list_webhooks(self, tenant_id: str | None) -> list[Webhook]:
        await self._enter()
        hooks = [w for w in self._webhooks.values() if tenant_id in (None, w.tenant_id)]
        return sorted(hooks, key=lambda w: (w.created_at, w.id))

    async def get_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        await self._enter()
        hook = self._webhooks.get(webhook_id)
        return hook if hook is not None and tenant in (None, hook.tenant_id) else None

    async def delete_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        await self._enter()
        hook = self._webhooks.get(webhook_id)
        if hook is None or tenant not in (None, hook.tenant_id):
            return None
        return self._webhooks.pop(webhook_id)

    async def record_events(self, events: Sequence[Event]) -> None:
        await self._enter()
        self._events.add(events)

    async def pending_events(self, limit: int) -> list[Event]:
        await self._enter()
        log = self._events
        pending = [e for e in log.events.values() if e.id not in log.dispatched]
        return sorted(pending, key=lambda e: (e.at, e.id))[:limit]

    async def dispatch_event(self, event_id: str, deliveries: Sequence[Delivery]) -> None:
        await self._enter()
        for delivery in deliveries:
            self._deliveries.setdefault(delivery.id, keep(delivery))
        event = self._events.events.get(event_id)
        if event is not None:
            self._events.dispatched.setdefault(event_id, event.at)

    async def claim_deliveries(
        self, now: datetime, lease_until: datetime, limit: int
    ) -> list[Delivery]:
        await self._enter()
        cutoff = utc(now)
        due = [
            d
            for d in self._deliveries.values()
            if d.status is DeliveryStatus.PENDING and d.next_attempt_at <= cutoff
        ]
        due.sort(key=lambda d: (d.next_attempt_at, d.id))
        claimed = []
        for delivery in due[:limit]:
            leased = attrs.evolve(delivery, next_attempt_at=utc(lease_until))
            self._deliveries[delivery.id] = leased
            claimed.append(leased)
        return claimed

    async def settle_delivery(self, claimed: Delivery, after: Delivery) -> Delivery | None:
        await self._enter()
        current = self._deliveries.get(claimed.id)
        if (
            current is None
            or current.status is not DeliveryStatus.PENDING
            or current.next_attempt_at != utc(claimed.next_attempt_at)
        ):
            return None
        self._deliveries[claimed.id] = keep(after)
        return self._deliveries[claimed.id]

    async def list_deliveries(
        self, webhook_id: str, *, limit: int, tenant: str | None = None
    ) -> list[Delivery]:
        await self._enter()
        found = [
            d
            for d in self._deliveries.values()
            if d.webhook_id == webhook_id and tenant in (None, d.tenant_id)
        ]
        found.sort(key=lambda d: (d.created_at, d.id), reverse=True)
        return found[:limit]

    async def prune_notifications(self, before: datetime) -> int:
        await self._enter()
        cutoff = utc(before)
        log = self._events
        old_events = [eid for eid, at in log.dispatched.items() if at < cutoff]
        for event_id in old_events:
            del log.dispatched[event_id]
            log.events.pop(event_id, None)
        old = [
            d.id
            for d in self._deliveries.values()
            if d.status is not DeliveryStatus.PENDING and d.updated_at < cutoff
        ]
        for delivery_id in old:
            del self._deliveries[delivery_id]
        return len(old_events) + len(old)
