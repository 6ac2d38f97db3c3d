"""Declarations of the webhook routes (failure notifications), in the terms of
:mod:`.jobs`: ``POST /webhooks``, ``GET /webhooks``, ``DELETE /webhooks/{id}`` and
``GET /webhooks/{id}/deliveries``, all for admins (a tenant's admin: its own tenant's).
``POST /webhooks`` reads and checks its body itself (``view_reads_body``)."""

from __future__ import annotations

from jobscheduler.api.route_table import Operation, Param, Reply
from jobscheduler.api.shapes import TIME, Schema
from jobscheduler.domain.keys import Role
from jobscheduler.domain.notifications import DeliveryStatus, EventType
from jobscheduler.errors import WebhookNotFound

from .jobs import TENANT_PARAM

#: Deliveries one ``GET /webhooks/{id}/deliveries`` answers: by default, and at most.
DEFAULT_DELIVERY_LIMIT = 50
MAX_DELIVERY_LIMIT = 500

EVENT_TYPE: Schema = {"type": "string", "enum": [e.value for e in EventType]}

WEBHOOK: Schema = {
    "type": "object",
    "required": ["id", "tenantId", "url", "events", "createdAt"],
    "properties": {
        "id": {"type": "string"},
        "tenantId": {"type": "string"},
        "url": {"type": "string"},
        "events": {"type": "array", "items": EVENT_TYPE},
        "name": {"type": "string"},
        "createdAt": TIME,
        "secret": {
            "type": "string",
            "description": "signs every delivery (X-Jobscheduler-Signature): shown once, at "
            "creation",
        },
    },
}

DELIVERY: Schema = {
    "type": "object",
    "required": ["id", "eventId", "eventType", "status", "attempts", "createdAt"],
    "properties": {
        "id": {"type": "string"},
        "eventId": {"type": "string"},
        "eventType": EVENT_TYPE,
        "status": {"type": "string", "enum": [s.value for s in DeliveryStatus]},
        "attempts": {"type": "integer"},
        "nextAttemptAt": TIME,
        "lastError": {"type": "string"},
        "lastStatus": {"type": "integer"},
        "createdAt": TIME,
        "updatedAt": TIME,
        "deliveredAt": TIME,
    },
}

WEBHOOK_ID = Param(
    name="webhook_id", where="path", schema={"type": "string"}, description="one webhook"
)

CREATE_WEBHOOK = Operation(
    id="create_webhook",
    method="POST",
    rule="/webhooks",
    summary="Register a webhook for failure notifications (admin); its secret is in the "
    "answer only",
    tag="webhooks",
    role=Role.ADMIN,
    unknown_params="ignore",
    view_reads_body=True,
    body={
        "type": "object",
        "additionalProperties": False,
        "required": ["url", "events"],
        "properties": {
            "tenantId": {"type": ["string", "null"]},
            "url": {"type": "string"},
            "events": {"type": "array", "items": EVENT_TYPE, "minItems": 1},
            "name": {"type": ["string", "null"]},
        },
    },
    responses={201: Reply(description="the webhook, with its secret", schema=WEBHOOK)},
)

LIST_WEBHOOKS = Operation(
    id="list_webhooks",
    method="GET",
    rule="/webhooks",
    summary="The webhooks (never their secrets), oldest first",
    tag="webhooks",
    role=Role.ADMIN,
    params=(TENANT_PARAM,),
    unknown_params="ignore",
    responses={200: Reply(description="the webhooks", schema={"type": "array", "items": WEBHOOK})},
)

DELETE_WEBHOOK = Operation(
    id="delete_webhook",
    method="DELETE",
    rule="/webhooks/<webhook_id>",
    summary="Delete a webhook (its pending deliveries are given up, its log stays)",
    tag="webhooks",
    role=Role.ADMIN,
    params=(WEBHOOK_ID,),
    unknown_params="ignore",
    responses={200: Reply(description="the webhook, deleted", schema=WEBHOOK)},
    errors={WebhookNotFound: ""},
)

DELIVERIES = Operation(
    id="webhook_deliveries",
    method="GET",
    rule="/webhooks/<webhook_id>/deliveries",
    summary="A webhook's deliveries, newest first: status, attempts, last error",
    tag="webhooks",
    role=Role.ADMIN,
    params=(
        WEBHOOK_ID,
        Param(
            name="limit",
            where="query",
            schema={"type": "integer", "minimum": 1, "maximum": MAX_DELIVERY_LIMIT},
            description=f"how many (default {DEFAULT_DELIVERY_LIMIT})",
        ),
    ),
    unknown_params="ignore",
    responses={
        200: Reply(
            description="the deliveries",
            schema={
                "type": "object",
                "required": ["webhookId", "deliveries"],
                "properties": {
                    "webhookId": {"type": "string"},
                    "deliveries": {"type": "array", "items": DELIVERY},
                },
            },
        )
    },
    errors={WebhookNotFound: ""},
)
