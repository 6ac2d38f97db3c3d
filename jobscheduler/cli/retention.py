"""``jobscheduler retention show|set|clear``: the retention the reaper prunes by, and a
tenant's override, straight in the configured store (as ``keys`` does: ``--store sqlite``
at SQLITE_PATH, ``--store mongo`` at MONGO_URI/MONGO_DB). The API's ``/retention`` routes do
the same for an admin key. Every set and clear is written to the audit trail.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

import trio

from jobscheduler.config import Settings
from jobscheduler.domain.keys import check_tenant
from jobscheduler.domain.retention import Override, Scope, format_keep, parse_keep
from jobscheduler.errors import JobSchedulerError, ValidationError
from jobscheduler.roles.retention import default_keep
from jobscheduler.store import JobStore

from .keys import add_store_option, append_cli_audit, failed, open_store, with_store

EPILOG = """\
Examples:
  jobscheduler retention show [--json]
  jobscheduler retention set acme completed=1d dlq=90d
  jobscheduler retention clear acme
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    sub = parser.add_subparsers(dest="retention_command", required=True)
    show = sub.add_parser("show", help="the defaults, every override and the last prune")
    show.add_argument("--json", action="store_true", help="one JSON object")
    add_store_option(show)
    change = sub.add_parser("set", help="set a tenant's override (statuses not named fall through)")
    change.add_argument("tenant", metavar="TENANT")
    change.add_argument("keep", metavar="STATUS=DURATION", nargs="+", help="e.g. completed=1d")
    add_store_option(change)
    clear = sub.add_parser("clear", help="delete a tenant's override")
    clear.add_argument("tenant", metavar="TENANT")
    add_store_option(clear)


def parse_pairs(pairs: list[str]) -> dict[str, str]:
    """``["completed=1d", "dlq=90d"]`` -> ``{"completed": "1d", "dlq": "90d"}``."""
    out: dict[str, str] = {}
    for pair in pairs:
        status, sep, duration = pair.partition("=")
        if not sep or not status or not duration:
            raise ValidationError(f"{pair!r}: write STATUS=DURATION, e.g. completed=1d")
        out[status.strip()] = duration.strip()
    return out


async def _show(store: JobStore, settings: Settings) -> dict[str, Any]:
    last = await store.last_prune()
    return {
        "defaults": format_keep(default_keep(settings)),
        "overrides": [o.to_json() for o in await store.retention_overrides()],
        "lastPrune": None if last is None else last.to_json(),
    }


def _text(rules: dict[str, Any]) -> str:
    lines = ["default   " + " ".join(f"{k}={v}" for k, v in rules["defaults"].items())]
    for override in rules["overrides"]:
        keep = " ".join(f"{k}={v}" for k, v in override["retention"].items())
        lines.append(f"{override['scope']:<9} {override['name']}: {keep}")
    last = rules["lastPrune"]
    if last is not None:
        pruned = " ".join(f"{k}={v}" for k, v in last["pruned"].items())
        lines.append(f"last prune {last['at']}: {pruned} in {last['took']}s")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    store, where = open_store(args)
    settings = Settings.from_env()
    now = datetime.now(UTC)
    try:
        if args.retention_command == "show":
            rules = trio.run(with_store, store, lambda s: _show(s, settings))
            print(json.dumps(rules, indent=2) if args.json else _text(rules))
            return 0
        tenant = check_tenant(args.tenant, "TENANT")
        keep = {}
        if args.retention_command == "set":
            try:
                keep = parse_keep(parse_pairs(args.keep))
            except ValueError as exc:
                raise ValidationError(str(exc)) from None
        override = Override(scope=Scope.TENANT, name=tenant, keep=keep, updated_at=now)
        detail = f"retention of {tenant} set to {format_keep(keep) or 'the defaults'}"

        async def write(s: JobStore) -> None:
            await s.set_retention(override)
            await append_cli_audit(
                s,
                now=now,
                tenant=tenant,
                action=f"cli retention {args.retention_command}",
                status=200,
                detail=detail,
            )

        trio.run(with_store, store, write)
        print(f"{detail} in {where}")
        return 0
    except JobSchedulerError as exc:
        return failed(exc)
