"""``jobscheduler webhooks add|list|remove|deliveries``: failure notifications, over the HTTP
API with an admin key (a tenant's admin: its own tenant's webhooks)."""

from __future__ import annotations

import argparse
from typing import Any

from jobscheduler.domain.notifications import EventType

from . import common as common

WEBHOOK_COLUMNS = [
    ("ID", "id"),
    ("TENANT", "tenantId"),
    ("URL", "url"),
    ("EVENTS", "events"),
    ("NAME", "name"),
    ("CREATED", "createdAt"),
]
DELIVERY_COLUMNS = [
    ("ID", "id"),
    ("EVENT", "eventType"),
    ("STATUS", "status"),
    ("ATTEMPTS", "attempts"),
    ("LAST STATUS", "lastStatus"),
    ("LAST ERROR", "lastError"),
    ("NEXT TRY", "nextAttemptAt"),
]

EPILOG = """examples:
  jobscheduler webhooks add https://hooks.example.com/jobs --event job.dlq --tenant acme
  jobscheduler webhooks add https://ops.example.com/x --event job.dlq --event template.run_failed
  jobscheduler webhooks list --tenant acme
  jobscheduler webhooks deliveries 65f0a1b2c3d4e5f6a7b8c9d0 --limit 20
  jobscheduler webhooks remove 65f0a1b2c3d4e5f6a7b8c9d0

events: job.dlq (a job reached dlq), template.run_failed (a cron run reached dlq),
workflow.failed (a workflow's step failed). Each delivery is a JSON POST signed with the
webhook's secret (printed once, by add): X-Jobscheduler-Signature: t=<unix seconds>,
v1=<hex HMAC-SHA256 of "<t>.<body>">.
"""


def configure(parser: argparse.ArgumentParser) -> None:
    sub = common.add_actions(parser, EPILOG)

    add = sub.add_parser("add", help="register a webhook; prints its secret once")
    add.add_argument("target", metavar="URL", help="where deliveries are POSTed")
    add.add_argument(
        "--event",
        dest="events",
        metavar="EVENT",
        action="append",
        required=True,
        choices=[e.value for e in EventType],
        help="an event type to receive (repeat for several)",
    )
    add.add_argument("--tenant", help="the tenant (default: the key's)")
    add.add_argument("--name", help="a label")
    common.add_common(add)

    listing = sub.add_parser("list", help="the webhooks (never their secrets)")
    listing.add_argument("--tenant", help="one tenant")
    common.add_common(listing)

    remove = sub.add_parser("remove", help="delete a webhook (its pending deliveries stop)")
    remove.add_argument("id")
    common.add_common(remove)

    deliveries = sub.add_parser("deliveries", help="a webhook's deliveries, newest first")
    deliveries.add_argument("id")
    deliveries.add_argument("--limit", type=common.positive_int, help="at most this many (50)")
    common.add_common(deliveries)


def _created(hook: dict[str, Any]) -> None:
    common.fields(hook)
    print("\nkeep the secret: it is shown only now, and signs every delivery")


def run(args: argparse.Namespace) -> int:
    with common.client_of(args) as client:
        if args.action == "add":
            hook = client.create_webhook(
                args.target, args.events, tenant_id=args.tenant, name=args.name
            )
            return common.show(args, hook, _created)
        if args.action == "list":
            hooks = client.list_webhooks(args.tenant)
            return common.show_table(args, hooks, WEBHOOK_COLUMNS)
        if args.action == "remove":
            return common.show(args, client.delete_webhook(args.id), common.fields)
        if args.action == "deliveries":
            reply = client.webhook_deliveries(args.id, args.limit)
            return common.show_table(args, reply["deliveries"], DELIVERY_COLUMNS)
    raise AssertionError(args.action)
