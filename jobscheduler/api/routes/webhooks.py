"""Webhook routes (failure notifications; :mod:`jobscheduler.roles.notifier` sends):

- ``POST /webhooks`` ``{tenantId?, url, events: [...], name?}`` -> 201 with the webhook and
  its ``secret`` (shown once);
- ``GET /webhooks[?tenantId=]`` -> the webhooks (never their secrets);
- ``DELETE /webhooks/{id}`` -> the webhook, deleted;
- ``GET /webhooks/{id}/deliveries[?limit=]`` -> its deliveries, newest first.

Admins only; a tenant's admin sees and manages only its tenant's (another tenant's webhook
answers as a missing one, 404). The URL is checked for its form here; whether its address
may be reached is the notifier's address guard's to say at each delivery.
"""

from __future__ import annotations

import logging
from typing import Any

from quart import Response, g, request

from jobscheduler.api.auth import current_principal
from jobscheduler.api.bodies import any_json_body, json_object
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.schemas import webhooks as ops
from jobscheduler.api.tenancy import Tenancy
from jobscheduler.domain.keys import check_name, check_tenant
from jobscheduler.domain.model import is_job_id
from jobscheduler.domain.notifications import (
    MAX_WEBHOOKS_PER_TENANT,
    EventType,
    Webhook,
    new_webhook,
)
from jobscheduler.domain.validation import is_valid_unicode, parse_limit
from jobscheduler.errors import ValidationError, WebhookNotFound
from jobscheduler.handlers.http import validate_url

log = logging.getLogger(__name__)

#: The fields of ``POST /webhooks``, as its declaration's schema names them.
FIELDS = frozenset((ops.CREATE_WEBHOOK.body or {})["properties"])


def parse_events(value: Any) -> list[EventType]:
    """``events``: a non-empty list of known event types."""
    if not isinstance(value, list) or not value:
        raise ValidationError("events: a non-empty list of event types")
    known = ", ".join(e.value for e in EventType)
    events = []
    for item in value:
        try:
            events.append(EventType(item))
        except ValueError:
            raise ValidationError(f"events: unknown event type {item!r} (known: {known})") from None
    return events


def _webhook_id(webhook_id: str) -> str:
    """The id as the store is asked for it; one that cannot be an id is a 404 at once."""
    if not is_job_id(webhook_id):
        raise WebhookNotFound(f"webhook {webhook_id[:64]} not found")
    return webhook_id


def register_webhook_routes(routes: RouteTable, tenancy: Tenancy) -> None:
    """Add the webhook routes to ``routes``."""
    deps = tenancy.deps

    async def visible(webhook_id: str) -> Webhook:
        principal = current_principal()
        hook = await tenancy.call(
            deps.store.get_webhook, _webhook_id(webhook_id), tenant=principal.tenant
        )
        if hook is None:  # another tenant's answers as a missing one
            raise WebhookNotFound(f"webhook {webhook_id} not found")
        return hook

    @routes.route(ops.CREATE_WEBHOOK)
    async def create_webhook() -> Response:
        principal = current_principal()
        body = json_object(await any_json_body(), FIELDS)
        raw_tenant = body.get("tenantId", principal.tenant)
        if raw_tenant is None:
            raise ValidationError("tenantId is required")
        tenant = check_tenant(raw_tenant)
        principal.scope(tenant)
        url = str(body.get("url") or "")
        validate_url(url, "url")
        if not is_valid_unicode(url):
            raise ValidationError("url: must be valid Unicode")
        events = parse_events(body.get("events"))
        name = check_name(body.get("name"))
        existing = await tenancy.call(deps.store.list_webhooks, tenant)
        if len(existing) >= MAX_WEBHOOKS_PER_TENANT:
            raise ValidationError(
                f"tenant {tenant!r} has {len(existing)} webhooks; at most "
                f"{MAX_WEBHOOKS_PER_TENANT}: delete one first"
            )
        hook = new_webhook(
            tenant_id=tenant, url=url, events=events, now=deps.clock.now(), name=name
        )
        await tenancy.call(deps.store.insert_webhook, hook)
        g.audit_detail = f"webhook {hook.id} created ({', '.join(e.value for e in hook.events)})"
        log.info(
            "webhook created",
            extra={"webhook_id": hook.id, "tenant": tenant, "by": principal.key_id},
        )
        return json_response(hook.to_json(with_secret=True), 201)

    @routes.route(ops.LIST_WEBHOOKS)
    async def list_webhooks() -> Response:
        principal = current_principal()
        tenant = principal.scope(request.args.get("tenantId") or None)
        hooks = await tenancy.call(deps.store.list_webhooks, tenant)
        return json_response([hook.to_json() for hook in hooks], 200)

    @routes.route(ops.DELETE_WEBHOOK)
    async def delete_webhook(webhook_id: str) -> Response:
        principal = current_principal()
        hook = await tenancy.call(
            deps.store.delete_webhook, _webhook_id(webhook_id), tenant=principal.tenant
        )
        if hook is None:
            raise WebhookNotFound(f"webhook {webhook_id} not found")
        g.audit_detail = f"webhook {hook.id} deleted"
        log.info(
            "webhook deleted",
            extra={"webhook_id": hook.id, "tenant": hook.tenant_id, "by": principal.key_id},
        )
        return json_response(hook.to_json(), 200)

    @routes.route(ops.DELIVERIES)
    async def webhook_deliveries(webhook_id: str) -> Response:
        hook = await visible(webhook_id)
        limit = parse_limit(
            request.args.get("limit") or None,
            default=ops.DEFAULT_DELIVERY_LIMIT,
            maximum=ops.MAX_DELIVERY_LIMIT,
        )
        deliveries = await tenancy.call(
            deps.store.list_deliveries, hook.id, limit=limit, tenant=hook.tenant_id
        )
        return json_response(
            {"webhookId": hook.id, "deliveries": [d.to_json() for d in deliveries]}, 200
        )
