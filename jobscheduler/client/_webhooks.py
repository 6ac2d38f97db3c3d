"""The webhook operations (failure notifications; admin keys): each returns the
:class:`~._call.Call` the clients send, as :mod:`._operations` does for jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import httpx

from ._call import Call, dict_of


def _list_of(response: httpx.Response) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], response.json())


def create_webhook(
    url: str,
    events: Sequence[str],
    *,
    tenant_id: str | None = None,
    name: str | None = None,
) -> Call[dict[str, Any]]:
    """Register a webhook for ``events`` (``job.dlq``, ``template.run_failed``,
    ``workflow.failed``); the answer carries its ``secret``, shown this once."""
    body: dict[str, Any] = {"url": url, "events": list(events)}
    if tenant_id is not None:
        body["tenantId"] = tenant_id
    if name is not None:
        body["name"] = name
    return Call("POST", "/webhooks", dict_of, body=body)


def list_webhooks(tenant_id: str | None = None) -> Call[list[dict[str, Any]]]:
    """The webhooks (of ``tenant_id``, or every one the key may see), without secrets."""
    params = [("tenantId", tenant_id)] if tenant_id else []
    return Call("GET", "/webhooks", _list_of, params=params)


def delete_webhook(webhook_id: str) -> Call[dict[str, Any]]:
    """Delete a webhook; its pending deliveries are given up."""
    return Call("DELETE", f"/webhooks/{webhook_id}", dict_of)


def webhook_deliveries(webhook_id: str, limit: int | None = None) -> Call[dict[str, Any]]:
    """A webhook's deliveries, newest first: ``{"webhookId", "deliveries": [...]}``."""
    params = [("limit", str(limit))] if limit is not None else []
    return Call("GET", f"/webhooks/{webhook_id}/deliveries", dict_of, params=params)
