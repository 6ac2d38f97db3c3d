"""Declarations of the webhook routes (failure notifications), in the terms of
:mod:`.jobs`: ``POST /webhooks``, ``GET /webhooks``, ``DELETE /webhooks/{id}`` and
``GET /webhooks/{id}/deliveries``, all for admins (a tenant's admin: its own tenant's).
``POST /webhooks`` reads and checks its body itself (``view_reads_body``)."""

from __future__ import annotations

from jobscheduler.api.route_table import Reply
from jobscheduler.api.shapes import TIME, Schema, array_of, closed_object
from jobscheduler.domain.keys import Role
from jobscheduler.domain.notifications import DeliveryStatus, EventType
from jobscheduler.errors import WebhookNotFound

from ._common import TENANT_PARAM, Operations, limit_param, path_param, reply_object

#: Deliveries one ``GET /webhooks/{id}/deliveries`` answers: by default, and at most.
DEFAULT_DELIVERY_LIMIT = 50
MAX_DELIVERY_LIMIT = 500

EVENT_TYPE: Schema = {"type": "string", "enum": [e.value for e in EventType]}

WEBHOOK: Schema = reply_object(
    required=["id", "tenantId", "url", "events", "createdAt"],
    properties={
        "id": {"type": "string"},
        "tenantId": {"type": "string"},
        "url": {"type": "string"},
        "events": array_of(EVENT_TYPE),
        "name": {"type": "string"},
        "createdAt": TIME,
        "secret": {
            "type": "string",
            "description": "signs every delivery (X-Jobscheduler-Signature): shown once, at "
            "creation",
        },
    },
)

DELIVERY: Schema = reply_object(
    required=["id", "eventId", "eventType", "status", "attempts", "createdAt"],
    properties={
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
)

WEBHOOK_ID = path_param("webhook_id", {"type": "string"}, "one webhook")

#: The webhook routes (``/webhooks`` + ``path``): for admins; unknown query parameters are
#: ignored.
webhooks_operation = Operations(
    prefix="/webhooks", tag="webhooks", role=Role.ADMIN, unknown_params="ignore"
)
#: An operation on one webhook (``/webhooks/<webhook_id>`` + ``path``); an unknown one is a 404.
webhook_operation = webhooks_operation.item(WEBHOOK_ID, WebhookNotFound)

CREATE_WEBHOOK = webhooks_operation(
    "create_webhook",
    "POST",
    "Register a webhook for failure notifications (admin); its secret is in the answer only",
    view_reads_body=True,
    body=closed_object(
        required=["url", "events"],
        properties={
            "tenantId": {"type": ["string", "null"]},
            "url": {"type": "string"},
            "events": {"type": "array", "items": EVENT_TYPE, "minItems": 1},
            "name": {"type": ["string", "null"]},
        },
    ),
    responses={201: Reply("the webhook, with its secret", WEBHOOK)},
)

LIST_WEBHOOKS = webhooks_operation(
    "list_webhooks",
    "GET",
    "The webhooks (never their secrets), oldest first",
    params=(TENANT_PARAM,),
    responses={200: Reply("the webhooks", array_of(WEBHOOK))},
)

DELETE_WEBHOOK = webhook_operation(
    "delete_webhook",
    "DELETE",
    "Delete a webhook (its pending deliveries are given up, its log stays)",
    responses={200: Reply("the webhook, deleted", WEBHOOK)},
)

DELIVERIES = webhook_operation(
    "webhook_deliveries",
    "GET",
    "A webhook's deliveries, newest first: status, attempts, last error",
    path="/deliveries",
    params=(limit_param(MAX_DELIVERY_LIMIT, f"how many (default {DEFAULT_DELIVERY_LIMIT})"),),
    responses={
        200: Reply(
            "the deliveries",
            reply_object(
                required=["webhookId", "deliveries"],
                properties={
                    "webhookId": {"type": "string"},
                    "deliveries": array_of(DELIVERY),
                },
            ),
        )
    },
)
