"""``jobscheduler schedules sync --app MODULE [--dry-run]``: make the store's cron templates
match the schedules the app declares in code (see :mod:`jobscheduler.handlers.sync`)."""

from __future__ import annotations

import argparse
import sys

import trio

from jobscheduler.client import AsyncClient
from jobscheduler.config import ClientSettings, Settings
from jobscheduler.errors import AppLoadError, ConfigError, ValidationError
from jobscheduler.handlers.loading import load_app
from jobscheduler.handlers.sync import Report, app_name, sync_schedules

from . import common as common

EPILOG = """examples:
  jobscheduler schedules sync --app myjobs --dry-run   # the diff, nothing changed
  jobscheduler schedules sync --app myjobs             # create, update, retire
"""


def configure(parser: argparse.ArgumentParser) -> None:
    sub = common.add_actions(parser, EPILOG)
    sync = sub.add_parser(
        "sync",
        help="create, update and retire templates so the store matches the app's schedules",
    )
    sync.add_argument(
        "--app",
        metavar="MODULE[:ATTRIBUTE]",
        help="the app declaring the schedules (default: JOBSCHEDULER_APP)",
    )
    sync.add_argument(
        "--dry-run", action="store_true", help="print what would change; change nothing"
    )
    sync.add_argument(
        "--tenant",
        action="append",
        default=[],
        metavar="TENANT",
        help="also look in this tenant for templates of the app to retire (repeatable)",
    )
    common.add_common(sync)


def _fail(message: str, code: int) -> int:
    print(f"jobscheduler schedules: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env()
        client_settings = ClientSettings.from_env()
    except ConfigError as exc:
        return _fail(f"configuration error: {exc}", 2)
    spec = args.app or settings.app
    if not spec:
        return _fail("--app is required (or set JOBSCHEDULER_APP): the app declaring schedules", 2)
    try:
        registry = load_app(spec, settings)
    except AppLoadError as exc:
        return _fail(f"--app: {exc}", 2)
    if not registry.schedules():
        print(f"app {spec!r} declares no schedule (registry.schedule); nothing to compare")

    async def main() -> Report:
        async with AsyncClient(args.url, api_key=args.api_key) as client:
            return await sync_schedules(
                client,
                registry,
                app=app_name(spec),
                dry_run=args.dry_run,
                tenants=args.tenant,
                default_tenant=client_settings.tenant_id,
            )

    try:
        report = trio.run(main)
    except ValidationError as exc:
        return _fail(str(exc), 1)
    if args.json:
        common.emit_json(
            {
                "app": report.app,
                "dryRun": report.dry_run,
                "steps": [
                    {
                        "action": o.step.action.value,
                        "tenantId": o.step.tenant,
                        "name": o.step.name,
                        "changes": {
                            k: {"from": a, "to": b} for k, (a, b) in o.step.changes.items()
                        },
                        "reason": o.step.reason or None,
                        "error": o.error,
                    }
                    for o in report.outcomes
                ],
            }
        )
    else:
        for line in report.lines():
            print(line)
    sys.stdout.flush()
    return 1 if report.problems else 0
