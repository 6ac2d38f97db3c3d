"""``jobscheduler workflows create|get|list|cancel|retry``: workflows over the API."""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Any

from jobscheduler._argtypes import json_value

from . import common as common

WORKFLOW_COLUMNS = [
    ("ID", "id"),
    ("TENANT", "tenantId"),
    ("KEY", "idempotencyKey"),
    ("STATUS", "status"),
    ("STEPS", "stepCount"),
    ("CREATED", "createdAt"),
]
STEP_COLUMNS = [
    ("STEP", "name"),
    ("STATUS", "status"),
    ("TYPE", "jobType"),
    ("DEPENDS ON", "dependsOn"),
    ("ATTEMPTS", "attempts"),
    ("JOB", "jobId"),
    ("LAST ERROR", "lastError"),
]

#: Request fields -> this command's flags, for its error lines.
FLAGS: dict[str, common.Flags] = {
    "create": {"tenantId": "--tenant", "idempotencyKey": "--key", "steps": "--steps"},
    "list": {
        "tenantId": "--tenant",
        "status": "--status",
        "idempotencyKeyPrefix": "--key-prefix",
        "templateId": "--template",
    },
    "retry": {"step": "--step"},
    "get": {},
    "cancel": {},
}

EPILOG = """examples:
  jobscheduler workflows create --tenant acme --key etl-2026-12-01 --steps '[
      {"name": "export", "jobType": "noop"},
      {"name": "transform", "jobType": "noop", "dependsOn": ["export"]}]' --wait 30
  jobscheduler workflows create --tenant acme --key etl-2 --file etl.json
  jobscheduler workflows list --tenant acme --status failed
  jobscheduler workflows get 65f0a1b2c3d4e5f6a7b8c9d0
  jobscheduler workflows retry 65f0a1b2c3d4e5f6a7b8c9d0 --step transform
  jobscheduler workflows cancel 65f0a1b2c3d4e5f6a7b8c9d0
"""


def _steps(text: str) -> list[dict[str, Any]]:
    """An argparse type: a JSON list of steps, or an object holding one under ``steps``."""
    value = json_value(text)
    if isinstance(value, dict) and isinstance(value.get("steps"), list):
        value = value["steps"]
    if not isinstance(value, list) or not all(isinstance(s, dict) for s in value):
        raise argparse.ArgumentTypeError('a JSON list of steps (objects), or {"steps": [...]}')
    return value


def _steps_file(path: str) -> list[dict[str, Any]]:
    """An argparse type: a file (``-``: standard input) holding :func:`_steps`."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {path}: {exc.strerror}") from None
    return _steps(text)


def configure(parser: argparse.ArgumentParser) -> None:
    sub = common.add_actions(parser, EPILOG)

    create = sub.add_parser("create", help="create a workflow from its steps (JSON)")
    create.add_argument("--tenant", required=True, help="the tenant (tenantId)")
    create.add_argument("--key", required=True, help="the workflow's idempotencyKey")
    given = create.add_mutually_exclusive_group(required=True)
    given.add_argument("--steps", type=_steps, help="the steps, a JSON list")
    given.add_argument(
        "--file", type=_steps_file, dest="steps", help="a JSON file of steps (-: stdin)"
    )
    create.add_argument("--wait", type=float, metavar="SECONDS", help="wait until it has ended")
    common.add_common(create)

    get = sub.add_parser("get", help="one workflow with every step and its status")
    get.add_argument("id")
    common.add_common(get)

    listing = sub.add_parser("list", help="a tenant's workflows, newest first (follows pages)")
    listing.add_argument("--tenant", help="the tenant (tenantId; default: the key's)")
    listing.add_argument("--status", action="append", help="only this status (repeat for several)")
    listing.add_argument("--key-prefix", help="only workflows whose key starts with this")
    listing.add_argument("--template", help="only the runs of this cron template")
    listing.add_argument(
        "--limit", type=common.positive_int, default=100, help="at most this many (100)"
    )
    common.add_common(listing)

    cancel = sub.add_parser("cancel", help="cancel every unfinished step of a workflow")
    cancel.add_argument("id")
    common.add_common(cancel)

    retry = sub.add_parser(
        "retry", help="resume a workflow: retry its failed or cancelled steps (or one)"
    )
    retry.add_argument("id")
    retry.add_argument("--step", help="only this step (and the steps its failure cancelled)")
    common.add_common(retry)


def _human(workflow: dict[str, Any]) -> None:
    common.fields({k: v for k, v in workflow.items() if k not in ("steps", "counts")})
    if "steps" in workflow:
        print()
        common.table(workflow["steps"], STEP_COLUMNS)


def run(args: argparse.Namespace) -> int:
    with common.client_of(args) as client:
        if args.action == "create":
            made = client.create_workflow(
                args.steps, tenant_id=args.tenant, idempotency_key=args.key
            )
            if args.wait is not None:
                return common.show(
                    args, client.wait_workflow(made["id"], timeout=args.wait), _human
                )
            return common.show(args, made, _human)
        if args.action == "get":
            return common.show(args, client.get_workflow(args.id), _human)
        if args.action == "list":
            found = client.list_workflows(
                args.tenant,
                status=args.status,
                idempotency_key_prefix=args.key_prefix,
                template_id=args.template,
            )
            page = list(itertools.islice(found, args.limit))
            return common.show_table(args, page, WORKFLOW_COLUMNS)
        if args.action == "cancel":
            return common.show(args, client.cancel_workflow(args.id), _human)
        return common.show(args, client.retry_workflow(args.id, step=args.step), _human)
