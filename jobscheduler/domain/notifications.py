"""Failure notifications: the events, the webhooks tenants register for them, and the
deliveries that carry one event to one webhook. Pure: the notifier role sends, the store
keeps.

An :class:`Event` is written by the store together with the transition it reports (a
:class:`~jobscheduler.domain.states.Change`'s ``events``), so no failure is reported without
having happened, nor lost once it has (where the store has transactions; MongoDB writes it
right after, as it writes attempt records). The notifier expands each event into one
:class:`Delivery` per webhook of its tenant that subscribed to its type; a delivery's id is
``<event id>.<webhook id>``, so expanding twice (after a crash) adds nothing.

A delivery is a JSON POST of :attr:`Delivery.body` (fixed when the delivery is made, so every
retry sends the same bytes), signed with the webhook's secret (:func:`signature`): the header
``X-Jobscheduler-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``. A
failed try is retried after :func:`delivery_backoff`, up to :data:`MAX_DELIVERY_ATTEMPTS`.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from .model import Job, format_time, new_job_id, optional_time, present, utc

#: The signature header of every delivery.
SIGNATURE_HEADER = "X-Jobscheduler-Signature"
#: Tries of one delivery before it is given up (``failed``).
MAX_DELIVERY_ATTEMPTS = 10
#: Wait after the first failed try; it doubles after each, up to :data:`MAX_BACKOFF`.
FIRST_BACKOFF = timedelta(seconds=5)
MAX_BACKOFF = timedelta(hours=1)
#: How long a receiver should accept a signature's timestamp (replay protection).
SIGNATURE_TOLERANCE = timedelta(minutes=5)
#: The most webhooks one tenant may register.
MAX_WEBHOOKS_PER_TENANT = 20
_SECRET_PREFIX = "whsec_"


class EventType(enum.StrEnum):
    """What a webhook can subscribe to."""

    #: A job reached ``dlq``: its attempts ran out, it failed permanently, or (a template)
    #: it can no longer fire.
    JOB_DLQ = "job.dlq"
    #: A run of a cron template reached ``dlq`` (sent besides ``job.dlq``).
    TEMPLATE_RUN_FAILED = "template.run_failed"
    #: A workflow failed: one of its steps reached ``dlq``, so the steps after it never run
    #: (:func:`workflow_failed`, written when the workflow is finished as failed).
    WORKFLOW_FAILED = "workflow.failed"


class DeliveryStatus(enum.StrEnum):
    #: Waiting for its next try (``next_attempt_at``).
    PENDING = "pending"
    #: A try was answered 2xx. Final.
    DELIVERED = "delivered"
    #: Given up: its tries ran out, the address is refused, or its webhook was deleted.
    FAILED = "failed"


@attrs.frozen(kw_only=True)
class Event:
    """Something a tenant may want to hear of; its JSON is :meth:`to_json`."""

    id: str
    type: EventType
    tenant_id: str
    at: datetime
    #: The event's details (``job``, ``template``, ``workflow``; see the README).
    data: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type.value,
            "at": format_time(self.at),
            "tenantId": self.tenant_id,
            "data": dict(self.data),
        }

    def body(self) -> str:
        """The JSON body every delivery of this event sends."""
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False)


def job_summary(job: Job) -> dict[str, Any]:
    """What an event says of a job: who, what, and why it failed (not its payload)."""
    return {
        "id": job.id,
        "idempotencyKey": job.idempotency_key,
        "jobType": job.job_type,
        "status": job.status.value,
        "attempts": job.attempts,
        "maxAttempts": job.max_attempts,
        **present(
            lastError=job.last_error,
            templateId=job.template_id,
            fireAt=optional_time(job.fire_at),
            cron=job.cron,
        ),
    }


def dlq_events(job: Job, now: datetime) -> tuple[Event, ...]:
    """The events of ``job`` (as it is after the transition) reaching ``dlq``: ``job.dlq``,
    and ``template.run_failed`` for a cron run."""
    now = utc(now)
    summary = job_summary(job)
    events = [
        Event(
            id=new_job_id(),
            type=EventType.JOB_DLQ,
            tenant_id=job.tenant_id,
            at=now,
            data={"job": summary},
        ),
    ]
    if job.template_id is not None:
        events.append(
            Event(
                id=new_job_id(),
                type=EventType.TEMPLATE_RUN_FAILED,
                tenant_id=job.tenant_id,
                at=now,
                data={"template": {"id": job.template_id}, "run": summary},
            )
        )
    return tuple(events)


def workflow_failed(
    *,
    workflow_id: str,
    tenant_id: str,
    failed_step: Job,
    now: datetime,
    key: str | None = None,
    template_id: str | None = None,
) -> Event:
    """The ``workflow.failed`` event: the workflow (its id, idempotency key, and the cron
    template that spawned it, if one did), and the step whose failure ended it."""
    workflow: dict[str, Any] = {"id": workflow_id}
    if key is not None:
        workflow["idempotencyKey"] = key
    if template_id is not None:
        workflow["templateId"] = template_id
    return Event(
        id=new_job_id(),
        type=EventType.WORKFLOW_FAILED,
        tenant_id=tenant_id,
        at=utc(now),
        data={"workflow": workflow, "failedStep": job_summary(failed_step)},
    )


@attrs.frozen(kw_only=True)
class Webhook:
    """A tenant's registered receiver of some event types."""

    id: str
    tenant_id: str
    url: str
    events: tuple[EventType, ...]
    #: Signs every delivery; shown to its creator once (the store keeps it: it signs).
    secret: str
    created_at: datetime
    name: str = ""

    def to_json(self, *, with_secret: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "tenantId": self.tenant_id,
            "url": self.url,
            "events": [event.value for event in self.events],
            "name": self.name,
            "createdAt": format_time(self.created_at),
        }
        if with_secret:
            out["secret"] = self.secret
        return out


def new_webhook(
    *, tenant_id: str, url: str, events: Sequence[EventType], now: datetime, name: str = ""
) -> Webhook:
    """A webhook with a fresh id and secret."""
    return Webhook(
        id=new_job_id(),
        tenant_id=tenant_id,
        url=url,
        events=tuple(dict.fromkeys(events)),
        secret=_SECRET_PREFIX + secrets.token_hex(32),
        created_at=utc(now),
        name=name,
    )


@attrs.frozen(kw_only=True)
class Delivery:
    """One event on its way to one webhook, and how its tries went."""

    id: str
    webhook_id: str
    tenant_id: str
    event_id: str
    event_type: EventType
    body: str
    status: DeliveryStatus = DeliveryStatus.PENDING
    attempts: int = 0
    next_attempt_at: datetime
    created_at: datetime
    updated_at: datetime
    last_error: str | None = None
    #: The HTTP status of the last try that got an answer.
    last_status: int | None = None
    delivered_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "eventId": self.event_id,
            "eventType": self.event_type.value,
            "status": self.status.value,
            "attempts": self.attempts,
            "createdAt": format_time(self.created_at),
            "updatedAt": format_time(self.updated_at),
        }
        if self.status is DeliveryStatus.PENDING:
            out["nextAttemptAt"] = format_time(self.next_attempt_at)
        out.update(
            present(
                lastError=self.last_error,
                lastStatus=self.last_status,
                deliveredAt=optional_time(self.delivered_at),
            )
        )
        return out


def delivery_of(event: Event, webhook: Webhook, now: datetime) -> Delivery:
    """The delivery of ``event`` to ``webhook``, due at once."""
    now = utc(now)
    return Delivery(
        id=f"{event.id}.{webhook.id}",
        webhook_id=webhook.id,
        tenant_id=event.tenant_id,
        event_id=event.id,
        event_type=event.type,
        body=event.body(),
        next_attempt_at=now,
        created_at=now,
        updated_at=now,
    )


def subscribers(event: Event, webhooks: Sequence[Webhook]) -> list[Webhook]:
    """The webhooks of the event's tenant that subscribed to its type."""
    return [w for w in webhooks if w.tenant_id == event.tenant_id and event.type in w.events]


def delivery_backoff(attempts: int) -> timedelta:
    """How long to wait after the ``attempts``-th failed try: 5 s, doubling, at most 1 h."""
    return min(FIRST_BACKOFF * (1 << max(attempts - 1, 0)), MAX_BACKOFF)


def after_try(
    delivery: Delivery,
    *,
    now: datetime,
    status: int | None,
    error: str | None,
    permanent: bool = False,
) -> Delivery:
    """``delivery`` after one more try that got ``status`` (None: no answer) or ``error``:
    delivered on a 2xx; else pending until its next try, or failed once the tries ran out
    (or at once when ``permanent``)."""
    now = utc(now)
    attempts = delivery.attempts + 1
    # What every try records; each outcome below adds only what is its own.
    tried: dict[str, Any] = {"attempts": attempts, "last_status": status, "updated_at": now}
    if error is None and status is not None and 200 <= status < 300:
        return attrs.evolve(
            delivery, status=DeliveryStatus.DELIVERED, last_error=None, delivered_at=now, **tried
        )
    if error is None:
        error = f"answered {status}"
    tried["last_error"] = error[:500]
    if permanent or attempts >= MAX_DELIVERY_ATTEMPTS:
        return attrs.evolve(delivery, status=DeliveryStatus.FAILED, **tried)
    return attrs.evolve(delivery, next_attempt_at=utc(now + delivery_backoff(attempts)), **tried)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value: ``t=<timestamp>,v1=<HMAC-SHA256(secret, "t.body")>``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify_signature(
    secret: str,
    header: str,
    body: bytes,
    *,
    now: int,
    tolerance: timedelta = SIGNATURE_TOLERANCE,
) -> bool:
    """What a receiver checks (given as the reference): ``header`` signs ``body`` with
    ``secret``, and its timestamp is within ``tolerance`` of ``now`` (unix seconds)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance.total_seconds():
        return False
    expected = signature(secret, timestamp, body).split("v1=", 1)[1]
    return hmac.compare_digest(expected, fields.get("v1", ""))
