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

from .codec import from_millis, from_nullable_millis, to_millis, to_nullable_millis
from .conn import SQLiteConnection, first_row, placeholders

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

INSERT_EVENT = "INSERT OR IGNORE INTO events (id, type, tenant_id, at, data) VALUES (?,?,?,?,?)"
_WEBHOOK_COLUMNS = "id, tenant_id, url, events, secret, name, created_at"
_DELIVERY_COLUMNS = (
    "id, webhook_id, tenant_id, event_id, event_type, body, status, attempts, "
    "next_attempt_at, created_at, updated_at, last_error, last_status, delivered_at"
)


def event_params(event: Event) -> tuple[Any, ...]:
    """The parameters of :data:`INSERT_EVENT` for ``event``."""
    data = json.dumps(dict(event.data), separators=(",", ":"), ensure_ascii=False)
    return (event.id, event.type.value, event.tenant_id, to_millis(event.at), data)


def _event_from_row(row: Sequence[Any]) -> Event:
    return Event(
        id=row[0],
        type=EventType(row[1]),
        tenant_id=row[2],
        at=from_millis(row[3]),
        data=json.loads(row[4]),
    )


def _webhook_from_row(row: Sequence[Any]) -> Webhook:
    return Webhook(
        id=row[0],
        tenant_id=row[1],
        url=row[2],
        events=tuple(EventType(e) for e in json.loads(row[3])),
        secret=row[4],
        name=row[5],
        created_at=from_millis(row[6]),
    )


def _webhook_by_id(webhook_id: str, tenant: str | None) -> tuple[str, tuple[str, ...]]:
    """The condition selecting one webhook by id (and of ``tenant``, when given), and its
    parameters."""
    if tenant is None:
        return "id = ?", (webhook_id,)
    return "id = ? AND tenant_id = ?", (webhook_id, tenant)


def _delivery_params(d: Delivery) -> tuple[Any, ...]:
    return (
        d.id,
        d.webhook_id,
        d.tenant_id,
        d.event_id,
        d.event_type.value,
        d.body,
        d.status.value,
        d.attempts,
        to_millis(d.next_attempt_at),
        to_millis(d.created_at),
        to_millis(d.updated_at),
        d.last_error,
        d.last_status,
        to_nullable_millis(d.delivered_at),
    )


def _delivery_from_row(row: Sequence[Any]) -> Delivery:
    return Delivery(
        id=row[0],
        webhook_id=row[1],
        tenant_id=row[2],
        event_id=row[3],
        event_type=EventType(row[4]),
        body=row[5],
        status=DeliveryStatus(row[6]),
        attempts=row[7],
        next_attempt_at=from_millis(row[8]),
        created_at=from_millis(row[9]),
        updated_at=from_millis(row[10]),
        last_error=row[11],
        last_status=row[12],
        delivered_at=from_nullable_millis(row[13]),
    )


class SQLiteNotificationsMixin(SQLiteConnection):
    """Webhooks, events and deliveries on the store's SQLite file."""

    async def insert_webhook(self, webhook: Webhook) -> Webhook:
        params = (
            webhook.id,
            webhook.tenant_id,
            webhook.url,
            json.dumps([e.value for e in webhook.events]),
            webhook.secret,
            webhook.name,
            to_millis(webhook.created_at),
        )

        sql = f"INSERT INTO webhooks ({_WEBHOOK_COLUMNS}) VALUES (?,?,?,?,?,?,?)"
        await self._insert_new(sql, params, "webhook")
        return webhook

    async def list_webhooks(self, tenant_id: str | None) -> list[Webhook]:
        mine, params = ("", ()) if tenant_id is None else (" WHERE tenant_id = ?", (tenant_id,))
        sql = f"SELECT {_WEBHOOK_COLUMNS} FROM webhooks{mine} ORDER BY created_at, id"
        return await self._read(
            lambda conn: [_webhook_from_row(r) for r in conn.execute(sql, params)]
        )

    async def get_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        where, params = _webhook_by_id(webhook_id, tenant)
        sql = f"SELECT {_WEBHOOK_COLUMNS} FROM webhooks WHERE {where}"
        return await self._read(lambda conn: first_row(conn, sql, params, _webhook_from_row))

    async def delete_webhook(self, webhook_id: str, *, tenant: str | None = None) -> Webhook | None:
        where, params = _webhook_by_id(webhook_id, tenant)
        sql = f"DELETE FROM webhooks WHERE {where} RETURNING {_WEBHOOK_COLUMNS}"
        return await self._write(lambda conn: first_row(conn, sql, params, _webhook_from_row))

    async def record_events(self, events: Sequence[Event]) -> None:
        rows = [event_params(e) for e in events]
        if rows:
            await self._write(lambda conn: conn.executemany(INSERT_EVENT, rows))

    async def pending_events(self, limit: int) -> list[Event]:
        sql = (
            "SELECT id, type, tenant_id, at, data FROM events INDEXED BY events_pending "
            "WHERE dispatched_at IS NULL ORDER BY at, id LIMIT ?"
        )
        return await self._read(
            lambda conn: [_event_from_row(r) for r in conn.execute(sql, (limit,))]
        )

    async def dispatch_event(self, event_id: str, deliveries: Sequence[Delivery]) -> None:
        rows = [_delivery_params(d) for d in deliveries]
        insert = (
            f"INSERT OR IGNORE INTO deliveries ({_DELIVERY_COLUMNS}) VALUES ({placeholders(14)})"
        )

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
            f"ORDER BY next_attempt_at, id LIMIT ?) RETURNING {_DELIVERY_COLUMNS}"
        )
        params = (to_millis(lease_until), to_millis(now), limit)

        def op(conn: sqlite3.Connection) -> list[Delivery]:
            rows = [_delivery_from_row(r) for r in conn.execute(sql, params)]
            return sorted(rows, key=lambda d: d.id)

        return await self._write(op)

    async def settle_delivery(self, claimed: Delivery, after: Delivery) -> Delivery | None:
        values = _delivery_params(after)
        sql = (
            "UPDATE deliveries SET status = ?, attempts = ?, next_attempt_at = ?, "
            "updated_at = ?, last_error = ?, last_status = ?, delivered_at = ? "
            "WHERE id = ? AND status = 'pending' AND next_attempt_at = ? "
            f"RETURNING {_DELIVERY_COLUMNS}"
        )
        params = (*values[6:9], *values[10:14], claimed.id, to_millis(claimed.next_attempt_at))

        return await self._write(lambda conn: first_row(conn, sql, params, _delivery_from_row))

    async def list_deliveries(
        self, webhook_id: str, *, limit: int, tenant: str | None = None
    ) -> list[Delivery]:
        mine = "" if tenant is None else " AND tenant_id = ?"
        params: tuple[Any, ...] = (webhook_id,) if tenant is None else (webhook_id, tenant)
        sql = (
            f"SELECT {_DELIVERY_COLUMNS} FROM deliveries WHERE webhook_id = ?{mine} "
            "ORDER BY created_at DESC, id DESC LIMIT ?"
        )
        return await self._read(
            lambda conn: [_delivery_from_row(r) for r in conn.execute(sql, (*params, limit))]
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
