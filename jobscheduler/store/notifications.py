"""The port of failure notifications: webhooks, the events written with the transitions
they report, and the deliveries the notifier role sends (:mod:`jobscheduler.domain.
notifications` has the records and what each means).

Part of :class:`~jobscheduler.store.base.JobStore` (the union of the ports); every adapter
passes ``tests/contract/test_store_notifications.py``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from jobscheduler.domain.notifications import Delivery, Event, Webhook


class Notifications(Protocol):
    """Webhooks, events and deliveries, beside the jobs."""

    @abc.abstractmethod
    async def insert_webhook(self, webhook: Webhook) -> Webhook:
        """Store a new webhook (its id is fresh; a clash is a StoreError)."""

    @abc.abstractmethod
    async def list_webhooks(self, tenant_id: str | None) -> list[Webhook]:
        """The webhooks of ``tenant_id`` (None: every tenant's), oldest first."""

    @abc.abstractmethod
    async def get_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        """The webhook with this id, or None (also when ``tenant`` is given and it is
        another tenant's)."""

    @abc.abstractmethod
    async def delete_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        """Delete the webhook and return it; None if there is none (or, with ``tenant``,
        it is another tenant's). Its deliveries stay (the log), and pending ones are given up
        by the notifier when it finds the webhook gone."""

    @abc.abstractmethod
    async def record_events(self, events: Sequence[Event]) -> None:
        """Append events unless their id is recorded already. Transitions write their own
        (``Change.events``, as they write attempt records); this is for a writer that
        learns only afterwards that its transition applied."""

    @abc.abstractmethod
    async def pending_events(self, limit: int) -> list[Event]:
        """Events not yet expanded into deliveries, oldest first, at most ``limit``."""

    @abc.abstractmethod
    async def dispatch_event(self, event_id: str, deliveries: Sequence[Delivery]) -> None:
        """Store ``deliveries`` (each unless its id is stored already), then mark the event
        expanded. Repeating it after a failure halfway adds nothing twice."""

    @abc.abstractmethod
    async def claim_deliveries(
        self, now: datetime, lease_until: datetime, limit: int
    ) -> list[Delivery]:
        """Take up to ``limit`` pending deliveries due at ``now`` (oldest due first): each
        one's ``next_attempt_at`` moves to ``lease_until``, conditionally, so concurrent
        callers never take one twice, and a caller that dies lets it come due again then.
        Returns them as claimed."""

    @abc.abstractmethod
    async def settle_delivery(self, claimed: Delivery, after: Delivery) -> Delivery | None:
        """Write ``after`` (a try's result) over the delivery, only if it is still as
        ``claimed`` left it (pending, the same lease); the delivery as stored, or None."""

    @abc.abstractmethod
    async def list_deliveries(
        self, webhook_id: str, *, limit: int, tenant: str | None = None
    ) -> list[Delivery]:
        """A webhook's deliveries, newest first, at most ``limit`` (none for another
        tenant's webhook when ``tenant`` is given)."""

    @abc.abstractmethod
    async def prune_notifications(self, before: datetime) -> int:
        """Delete expanded events and finished deliveries last changed before ``before``;
        returns how many records."""
