"""The SQLite tables of notifications: webhooks, events and deliveries.

A mixin of :class:`~jobscheduler.store.sqlite.store.SQLiteJobStore`, on the ``_read``/``_write``
of :class:`~jobscheduler.store.sqlite.conn.SQLiteConnection`; the tables are created with the
jobs schema at ``start``. Events are also written by the transitions that report them, in
the transition's own transaction (:data:`INSERT_EVENT`, :func:`event_params`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jobscheduler.domain.notifications import (
    Delivery,
    DeliveryStatus,
    Event,
    EventType,
    Webhook,
)

from .codec import to_millis
from .conn import SQLiteConnection, first_row
from .rows import Column, Rows, enum_column, millis_column

NOTIFICATIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS webhooks (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    url        TEXT NOT NULL,
    events     TEXT NOT NULL,
    secret     TEXT NOT NULL,
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS webhooks_tenant ON webhooks (tenant_id, created_at);
CREATE TABLE IF NOT EXISTS events (
    id            TEXT PRIMARY KEY,
    type          TEXT NOT NULL,
    tenant_id     TEXT NOT NULL,
    at            INTEGER NOT NULL,
    data          TEXT NOT NULL,
    dispatched_at INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_pending ON events (at, id) WHERE dispatched_at IS NULL;
CREATE INDEX IF NOT EXISTS events_dispatched ON events (dispatched_at)
    WHERE dispatched_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS deliveries (
    id              TEXT PRIMARY KEY,
    webhook_id      TEXT NOT NULL,
    tenant_id       TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event_type      TEXT NOT NULL,
    body            TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    last_error      TEXT,
    last_status     INTEGER,
    delivered_at    INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (next_attempt_at, id)
    WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS deliveries_webhook ON deliveries (webhook_id, created_at, id);
CREATE INDEX IF NOT EXISTS deliveries_finished ON deliveries (updated_at)
    WHERE status != 'pending';
"""


def _event_data(data: Any) -> str:
    return json.dumps(dict(data), separators=(",", ":"), ensure_ascii=False)


def _event_types(stored: str) -> tuple[EventType, ...]:
    return tuple(EventType(e) for e in json.loads(stored))


_EVENTS = Rows(
    Event,
    Column("id"),
    enum_column("type", EventType),
    Column("tenant_id"),
    millis_column("at"),
    Column("data", store=_event_data, load=json.loads),
)
INSERT_EVENT = _EVENTS.insert("events", "INSERT OR IGNORE")
#: The parameters of :data:`INSERT_EVENT` for an event.
event_params = _EVENTS.params
_WEBHOOKS = Rows(
    Webhook,
    Column("id"),
    Column("tenant_id"),
    Column("url"),
    Column("events", store=lambda types: json.dumps([e.value for e in types]), load=_event_types),
    Column("secret"),
    Column("name"),
    millis_column("created_at"),
)
_DELIVERIES = Rows(
    Delivery,
    Column("id"),
    Column("webhook_id"),
    Column("tenant_id"),
    Column("event_id"),
    enum_column("event_type", EventType),
    Column("body"),
    enum_column("status", DeliveryStatus),
    Column("attempts"),
    millis_column("next_attempt_at"),
    millis_column("created_at"),
    millis_column("updated_at"),
    Column("last_error"),
    Column("last_status"),
    millis_column("delivered_at", nullable=True),
)


def _webhook_by_id(webhook_id: str, tenant: str | None) -> tuple[str, tuple[str, ...]]:
    """The condition selecting one webhook by id (and of ``tenant``, when given), and its
    parameters."""
    if tenant is None:
        return "id = ?", (webhook_id,)
    return "id = ? AND tenant_id = ?", (webhook_id, tenant)


class SQLiteNotificationsMixin(SQLiteConnection):
    """Webhooks, events and deliveries on the store's SQLite file."""

    async def insert_webhook(self, webhook: Webhook) -> Webhook:
        await self._insert_new(_WEBHOOKS.insert("webhooks"), _WEBHOOKS.params(webhook), "webhook")
        return webhook

    async def list_webhooks(self, tenant_id: str | None) -> list[Webhook]:
        mine, params = ("", ()) if tenant_id is None else (" WHERE tenant_id = ?", (tenant_id,))
        sql = f"SELECT {_WEBHOOKS.select} FROM webhooks{mine} ORDER BY created_at, id"
        return await self._read(lambda conn: [_WEBHOOKS.load(r) for r in conn.execute(sql, params)])

    async def get_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        where, params = _webhook_by_id(webhook_id, tenant)
        sql = f"SELECT {_WEBHOOKS.select} FROM webhooks WHERE {where}"
        return await self._read(lambda conn: first_row(conn, sql, params, _WEBHOOKS.load))

    async def delete_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        where, params = _webhook_by_id(webhook_id, tenant)
        sql = f"DELETE FROM webhooks WHERE {where} RETURNING {_WEBHOOKS.select}"
        return await self._write(lambda conn: first_row(conn, sql, params, _WEBHOOKS.load))

    async def record_events(self, events: Sequence[Event]) -> None:
        rows = [event_params(e) for e in events]
        if rows:
            await self._write(lambda conn: conn.executemany(INSERT_EVENT, rows))

    async def pending_events(self, limit: int) -> list[Event]:
        sql = (
            f"SELECT {_EVENTS.select} FROM events INDEXED BY events_pending "
            "WHERE dispatched_at IS NULL ORDER BY at, id LIMIT ?"
        )
        return await self._read(lambda conn: [_EVENTS.load(r) for r in conn.execute(sql, (limit,))])

    async def dispatch_event(self, event_id: str, deliveries: Sequence[Delivery]) -> None:
        rows = [_DELIVERIES.params(d) for d in deliveries]
        insert = _DELIVERIES.insert("deliveries", "INSERT OR IGNORE")

        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(insert, rows)
            conn.execute(
                "UPDATE events SET dispatched_at = at WHERE id = ? AND dispatched_at IS NULL",
                (event_id,),
            )

        await self._write(op)

    async def claim_deliveries(
        self, now: datetime, lease_until: datetime, limit: int
    ) -> list[Delivery]:
        sql = (
            f"UPDATE deliveries SET next_attempt_at = ? WHERE id IN ("
            f"SELECT id FROM deliveries INDEXED BY deliveries_due "
            f"WHERE status = 'pending' AND next_attempt_at <= ? "
            f"ORDER BY next_attempt_at, id LIMIT ?) RETURNING {_DELIVERIES.select}"
        )
        params = (to_millis(lease_until), to_millis(now), limit)

        def op(conn: sqlite3.Connection) -> list[Delivery]:
            rows = [_DELIVERIES.load(r) for r in conn.execute(sql, params)]
            return sorted(rows, key=lambda d: d.id)

        return await self._write(op)

    async def settle_delivery(self, claimed: Delivery, after: Delivery) -> Delivery | None:
        values = _DELIVERIES.params(after)
        sql = (
            "UPDATE deliveries SET status = ?, attempts = ?, next_attempt_at = ?, "
            "updated_at = ?, last_error = ?, last_status = ?, delivered_at = ? "
            "WHERE id = ? AND status = 'pending' AND next_attempt_at = ? "
            f"RETURNING {_DELIVERIES.select}"
        )
        params = (*values[6:9], *values[10:14], claimed.id, to_millis(claimed.next_attempt_at))

        return await self._write(lambda conn: first_row(conn, sql, params, _DELIVERIES.load))

    async def list_deliveries(
        self, webhook_id: str, *, limit: int, tenant: str | None = None
    ) -> list[Delivery]:
        mine = "" if tenant is None else " AND tenant_id = ?"
        params: tuple[Any, ...] = (webhook_id,) if tenant is None else (webhook_id, tenant)
        sql = (
            f"SELECT {_DELIVERIES.select} FROM deliveries WHERE webhook_id = ?{mine} "
            "ORDER BY created_at DESC, id DESC LIMIT ?"
        )
        return await self._read(
            lambda conn: [_DELIVERIES.load(r) for r in conn.execute(sql, (*params, limit))]
        )

    async def prune_notifications(self, before: datetime) -> int:
        cutoff = to_millis(before)

        def op(conn: sqlite3.Connection) -> int:
            events = conn.execute(
                "DELETE FROM events WHERE dispatched_at IS NOT NULL AND dispatched_at < ?",
                (cutoff,),
            ).rowcount
            deliveries = conn.execute(
                "DELETE FROM deliveries WHERE status != 'pending' AND updated_at < ?", (cutoff,)
            ).rowcount
            return int(events + deliveries)

        return await self._write(op)
