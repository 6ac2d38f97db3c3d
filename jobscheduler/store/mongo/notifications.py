"""The MongoDB collections of notifications: ``webhooks``, ``events`` and ``deliveries``.

A mixin of :class:`~jobscheduler.store.mongo.store.MongoJobStore` (it uses that store's
``_call`` plumbing and client); the indexes are created at ``start`` with the others.
Events are also written by the transitions that report them, right after them in the same
call (:func:`write_events`; MongoDB has no multi-document transaction here, as for attempt
records). A delivery is claimed by a conditional update of its ``nextAttemptAt``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from pymongo import ASCENDING, DESCENDING, IndexModel, MongoClient, ReturnDocument
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError

from jobscheduler.domain.model import utc
from jobscheduler.domain.notifications import (
    Delivery,
    DeliveryStatus,
    Event,
    EventType,
    Webhook,
)
from jobscheduler.domain.states import Change

from .codec import Document, stored_time
from .seam import MongoSeam

WEBHOOKS: Final = "webhooks"
EVENTS: Final = "events"
DELIVERIES: Final = "deliveries"
_INDEXES: Final = {
    WEBHOOKS: [IndexModel([("tenantId", ASCENDING), ("createdAt", ASCENDING)], name="tenant")],
    EVENTS: [IndexModel([("dispatchedAt", ASCENDING), ("at", ASCENDING)], name="pending")],
    DELIVERIES: [
        IndexModel([("status", ASCENDING), ("nextAttemptAt", ASCENDING)], name="due"),
        IndexModel([("webhookId", ASCENDING), ("createdAt", DESCENDING)], name="webhook"),
        IndexModel([("status", ASCENDING), ("updatedAt", ASCENDING)], name="finished"),
    ],
}


def event_to_document(event: Event) -> Document:
    return {
        "_id": event.id,
        "type": event.type.value,
        "tenantId": event.tenant_id,
        "at": utc(event.at),
        "data": dict(event.data),
        "dispatchedAt": None,
    }


def _event(doc: Mapping[str, Any]) -> Event:
    return Event(
        id=doc["_id"],
        type=EventType(doc["type"]),
        tenant_id=doc["tenantId"],
        at=stored_time(doc["at"]),
        data=doc["data"],
    )


def _webhook_doc(webhook: Webhook) -> Document:
    return {
        "_id": webhook.id,
        "tenantId": webhook.tenant_id,
        "url": webhook.url,
        "events": [e.value for e in webhook.events],
        "secret": webhook.secret,
        "name": webhook.name,
        "createdAt": utc(webhook.created_at),
    }


def _webhook(doc: Mapping[str, Any]) -> Webhook:
    return Webhook(
        id=doc["_id"],
        tenant_id=doc["tenantId"],
        url=doc["url"],
        events=tuple(EventType(e) for e in doc["events"]),
        secret=doc["secret"],
        name=doc.get("name") or "",
        created_at=stored_time(doc["createdAt"]),
    )


def _delivery_doc(d: Delivery) -> Document:
    return {
        "_id": d.id,
        "webhookId": d.webhook_id,
        "tenantId": d.tenant_id,
        "eventId": d.event_id,
        "eventType": d.event_type.value,
        "body": d.body,
        **_delivery_state(d),
        "createdAt": utc(d.created_at),
    }


def _delivery_state(d: Delivery) -> Document:
    """The fields a try changes."""
    return {
        "status": d.status.value,
        "attempts": d.attempts,
        "nextAttemptAt": utc(d.next_attempt_at),
        "updatedAt": utc(d.updated_at),
        "lastError": d.last_error,
        "lastStatus": d.last_status,
        "deliveredAt": None if d.delivered_at is None else utc(d.delivered_at),
    }


def _delivery(doc: Mapping[str, Any]) -> Delivery:
    delivered = doc.get("deliveredAt")
    return Delivery(
        id=doc["_id"],
        webhook_id=doc["webhookId"],
        tenant_id=doc["tenantId"],
        event_id=doc["eventId"],
        event_type=EventType(doc["eventType"]),
        body=doc["body"],
        status=DeliveryStatus(doc["status"]),
        attempts=int(doc["attempts"]),
        next_attempt_at=stored_time(doc["nextAttemptAt"]),
        created_at=stored_time(doc["createdAt"]),
        updated_at=stored_time(doc["updatedAt"]),
        last_error=doc.get("lastError"),
        last_status=doc.get("lastStatus"),
        delivered_at=None if delivered is None else stored_time(delivered),
    )


def _insert_ignoring_duplicates(collection: Collection[Document], docs: list[Document]) -> None:
    """Insert ``docs``; one whose id is stored already is a no-op (a repeated write)."""
    if not docs:
        return
    try:
        collection.insert_many(docs, ordered=False)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if any(error.get("code") != 11000 for error in errors):
            raise


def write_events(
    client: MongoClient[Document] | None,
    database: str,
    changes: Sequence[Change],
    results: Sequence[Any],
) -> None:
    """Write the events of the changes that applied (``results[i]`` a Job or True), right
    after the transitions, in the same worker thread."""
    docs = [
        event_to_document(event)
        for change, result in zip(changes, results, strict=True)
        if change.events and result is not None and result is not False
        for event in change.events
    ]
    if docs and client is not None:
        _insert_ignoring_duplicates(client.get_database(database).get_collection(EVENTS), docs)


def create_notification_indexes(client: MongoClient[Document], database: str) -> None:
    """Create the indexes (one per command, as for the jobs)."""
    db = client.get_database(database)
    for name, indexes in _INDEXES.items():
        for index in indexes:
            db.get_collection(name).create_indexes([index])


class MongoNotificationsMixin(MongoSeam):
    """Webhooks, events and deliveries in the store's database."""

    async def insert_webhook(self, webhook: Webhook) -> Webhook:
        await self._insert_new(WEBHOOKS, _webhook_doc(webhook), "webhook")
        return webhook

    async def list_webhooks(self, tenant_id: str | None) -> list[Webhook]:
        hooks = self._durable(WEBHOOKS)
        query: Document = {} if tenant_id is None else {"tenantId": tenant_id}
        sort = [("createdAt", ASCENDING), ("_id", ASCENDING)]
        return await self._call(
            lambda: [_webhook(d) for d in hooks.find(query, sort=sort)], "list_webhooks", read=True
        )

    async def get_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        hooks = self._durable(WEBHOOKS)
        query = {"_id": webhook_id} if tenant is None else {"_id": webhook_id, "tenantId": tenant}
        doc = await self._call(lambda: hooks.find_one(query), "get_webhook", read=True)
        return None if doc is None else _webhook(doc)

    async def delete_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        hooks = self._durable(WEBHOOKS)
        query = {"_id": webhook_id} if tenant is None else {"_id": webhook_id, "tenantId": tenant}
        doc = await self._call(lambda: hooks.find_one_and_delete(query), "delete_webhook")
        return None if doc is None else _webhook(doc)

    async def record_events(self, events: Sequence[Event]) -> None:
        log = self._durable(EVENTS)
        docs = [event_to_document(e) for e in events]
        await self._call(lambda: _insert_ignoring_duplicates(log, docs), "record_events")

    async def pending_events(self, limit: int) -> list[Event]:
        log = self._durable(EVENTS)
        sort = [("at", ASCENDING), ("_id", ASCENDING)]

        def op() -> list[Event]:
            return [_event(d) for d in log.find({"dispatchedAt": None}, sort=sort, limit=limit)]

        return await self._call(op, "pending_events", read=True)

    async def dispatch_event(self, event_id: str, deliveries: Sequence[Delivery]) -> None:
        log = self._durable(EVENTS)
        table = self._durable(DELIVERIES)
        docs = [_delivery_doc(d) for d in deliveries]

        def op() -> None:
            _insert_ignoring_duplicates(table, docs)
            event = log.find_one({"_id": event_id}, projection={"at": 1})
            if event is not None:
                log.update_one(
                    {"_id": event_id, "dispatchedAt": None},
                    {"$set": {"dispatchedAt": event["at"]}},
                )

        await self._call(op, "dispatch_event")

    async def claim_deliveries(
        self, now: datetime, lease_until: datetime, limit: int
    ) -> list[Delivery]:
        table = self._durable(DELIVERIES)
        due = {"status": DeliveryStatus.PENDING.value, "nextAttemptAt": {"$lte": utc(now)}}
        sort = [("nextAttemptAt", ASCENDING), ("_id", ASCENDING)]

        def op() -> list[Delivery]:
            claimed: list[Delivery] = []
            for doc in table.find(due, sort=sort, limit=limit):
                leased = table.find_one_and_update(
                    {
                        "_id": doc["_id"],
                        "status": DeliveryStatus.PENDING.value,
                        "nextAttemptAt": doc["nextAttemptAt"],
                    },
                    {"$set": {"nextAttemptAt": utc(lease_until)}},
                    return_document=ReturnDocument.AFTER,
                )
                if leased is not None:
                    claimed.append(_delivery(leased))
            return claimed

        return await self._call(op, "claim_deliveries")

    async def settle_delivery(self, claimed: Delivery, after: Delivery) -> Delivery | None:
        table = self._durable(DELIVERIES)
        query = {
            "_id": claimed.id,
            "status": DeliveryStatus.PENDING.value,
            "nextAttemptAt": utc(claimed.next_attempt_at),
        }

        def op() -> Delivery | None:
            doc = table.find_one_and_update(
                query, {"$set": _delivery_state(after)}, return_document=ReturnDocument.AFTER
            )
            return None if doc is None else _delivery(doc)

        return await self._call(op, "settle_delivery")

    async def list_deliveries(
        self, webhook_id: str, *, limit: int, tenant: str | None = None
    ) -> list[Delivery]:
        table = self._durable(DELIVERIES)
        query: Document = {"webhookId": webhook_id}
        if tenant is not None:
            query["tenantId"] = tenant
        sort = [("createdAt", DESCENDING), ("_id", DESCENDING)]

        def op() -> list[Delivery]:
            return [_delivery(d) for d in table.find(query, sort=sort, limit=limit)]

        return await self._call(op, "list_deliveries", read=True)

    async def prune_notifications(self, before: datetime) -> int:
        log = self._durable(EVENTS)
        table = self._durable(DELIVERIES)
        cutoff = utc(before)

        def op() -> int:
            events = log.delete_many({"dispatchedAt": {"$ne": None, "$lt": cutoff}})
            deliveries = table.delete_many(
                {"status": {"$ne": DeliveryStatus.PENDING.value}, "updatedAt": {"$lt": cutoff}}
            )
            return int(events.deleted_count + deliveries.deleted_count)

        return await self._call(op, "prune_notifications")
