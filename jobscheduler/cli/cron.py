"""``jobscheduler cron list|pause|resume|trigger|update|delete|preview|next|ledger``: cron
templates."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from . import common as common

TEMPLATE_COLUMNS = [
    ("ID", "id"),
    ("TENANT", "tenantId"),
    ("TYPE", "jobType"),
    ("CRON", "cron"),
    ("TIMEZONE", "timezone"),
    ("STATUS", "status"),
    ("NEXT FIRE", "scheduledAt"),
]
FIRE_COLUMNS = [("AT (UTC)", "at"), ("LOCAL", "local"), ("SHIFTED", "shifted")]
#: The largest page ``GET /jobs/{id}/occurrences`` gives (its ``limit``).
MAX_LEDGER_PAGE = 500
LEDGER_COLUMNS = [
    ("FIRE AT (UTC)", "fireAt"),
    ("LOCAL", "fireAtLocal"),
    ("STATUS", "status"),
    ("REASON", "reason"),
    ("RUN", "runId"),
    ("RUN STATUS", "runStatus"),
    ("LATE (S)", "lateSeconds"),
]

#: Per action, the request fields it sends -> their flags (an API error names the flag).
FLAGS: dict[str, common.Flags] = {
    "list": {"tenantId": "--tenant", "allTenants": "--all-tenants", "limit": "--limit"},
    **{action: {} for action in ("pause", "resume", "trigger", "delete")},
    "update": {
        "cron": "--cron",
        "payload": "--payload",
        "priority": "--priority",
        "maxAttempts": "--max-attempts",
    },
    "preview": {
        "cron": "EXPRESSION",
        "timezone": "--timezone",
        "count": "--count",
        "from": "--from",
    },
    "next": {"count": "--count"},
    "ledger": {"limit": "--limit"},
}

EPILOG = """examples:
  jobscheduler cron preview '30 2 * * *' --timezone Europe/Paris --count 5
  jobscheduler cron list --tenant acme
  jobscheduler cron pause 65f0a1b2c3d4e5f6a7b8c9d0
  jobscheduler cron update 65f0a1b2c3d4e5f6a7b8c9d0 --cron '*/10 * * * *'
  jobscheduler cron ledger 65f0a1b2c3d4e5f6a7b8c9d0 --limit 20
"""


def configure(parser: argparse.ArgumentParser) -> None:
    sub = common.add_actions(parser, EPILOG)

    listing = sub.add_parser("list", help="a tenant's cron templates")
    tenants = listing.add_mutually_exclusive_group()
    tenants.add_argument("--tenant", help="the tenant (tenantId)")
    tenants.add_argument(
        "--all-tenants",
        action="store_true",
        help="every tenant's templates, instead of --tenant (an admin key of every tenant)",
    )
    listing.add_argument(
        "--limit", type=common.positive_int, default=100, help="at most this many (100)"
    )
    common.add_common(listing)

    for name, text in (
        ("pause", "stop a template firing until resumed"),
        ("resume", "resume a template; it fires next from now (no burst)"),
        ("trigger", "run a template once now"),
        ("delete", "retire a template (its past runs stay)"),
    ):
        action = sub.add_parser(name, help=text)
        action.add_argument("id")
        common.add_common(action)

    update = sub.add_parser("update", help="change a template's cron, payload, priority")
    update.add_argument("id")
    update.add_argument("--cron", help="a new 5-field expression")
    update.add_argument("--payload", type=common.json_object, help="a new JSON object")
    update.add_argument("--priority", type=int)
    update.add_argument("--max-attempts", type=int)
    common.add_common(update)

    preview = sub.add_parser("preview", help="the fire times of any expression")
    preview.add_argument("cron", metavar="EXPRESSION")
    preview.add_argument("--timezone", help="an IANA zone (default UTC)")
    preview.add_argument("--count", type=common.positive_int, help="how many (10)")
    preview.add_argument("--from", dest="start", help="start after this RFC3339 time")
    common.add_common(preview)

    upcoming = sub.add_parser("next", help="a stored template's next fire times")
    upcoming.add_argument("id")
    upcoming.add_argument("--count", type=common.positive_int, help="how many (10)")
    common.add_common(upcoming)

    ledger = sub.add_parser(
        "ledger", help="a template's past fire times and what became of each, newest first"
    )
    ledger.add_argument("id")
    ledger.add_argument(
        "--limit", type=common.positive_int, default=50, help="at most this many (50)"
    )
    common.add_common(ledger)


def _fires(reply: dict[str, Any]) -> None:
    print(f"{reply['cron']}  ({reply['timezone']})")
    common.table(reply["fireTimes"], FIRE_COLUMNS)


def _ledger(items: list[dict[str, Any]]) -> None:
    """The ledger as a table: a run's status flattened into its own column."""
    rows = [item | {"runStatus": (item.get("run") or {}).get("status")} for item in items]
    common.table(rows, LEDGER_COLUMNS)


def run(args: argparse.Namespace) -> int:
    with common.client_of(args) as client:
        if args.action == "list":
            every = client.list(args.tenant, cron=True, all_tenants=args.all_tenants)
            templates = list(itertools.islice(every, args.limit))
            # A server without the cron filter lists one-off jobs too: show templates only.
            templates = [t for t in templates if t.get("cron")]
            return common.show_table(args, templates, TEMPLATE_COLUMNS)
        if args.action in ("pause", "resume", "trigger", "delete"):
            job = getattr(client, args.action)(args.id)
            return common.show(args, job, common.fields)
        if args.action == "update":
            job = client.update(
                args.id,
                cron=args.cron,
                payload=args.payload,
                priority=args.priority,
                max_attempts=args.max_attempts,
            )
            return common.show(args, job, common.fields)
        if args.action == "preview":
            reply = client.preview(
                args.cron, timezone=args.timezone, count=args.count, start=args.start
            )
            return common.show(args, reply, _fires)
        if args.action == "next":
            return common.show(args, client.next(args.id, args.count), _fires)
        if args.action == "ledger":
            page_size = min(args.limit, MAX_LEDGER_PAGE)
            items = list(
                itertools.islice(client.occurrences(args.id, page_size=page_size), args.limit)
            )
            return common.show(args, items, _ledger)
    raise AssertionError(args.action)
