"""``jobscheduler jobs list|get|create|cancel|retry``: look at and act on jobs over the API."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from . import _cli_common as common

JOB_COLUMNS = [
    ("ID", "id"),
    ("TENANT", "tenantId"),
    ("TYPE", "jobType"),
    ("STATUS", "status"),
    ("SCHEDULED", "scheduledAt"),
    ("ATTEMPTS", "attempts"),
    ("CRON", "cron"),
]

EPILOG = """examples:
  jobscheduler jobs create noop --tenant acme --wait 30
  jobscheduler jobs list --tenant acme --status dlq
  jobscheduler jobs get 65f0a1b2c3d4e5f6a7b8c9d0 --json
  jobscheduler jobs retry 65f0a1b2c3d4e5f6a7b8c9d0 --payload '{"message": "again"}'
  jobscheduler jobs cancel --tenant acme --status pending --type noop   (every match)
"""


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", help="the tenant (tenantId)")
    parser.add_argument("--status", action="append", help="only this status (repeat for several)")
    parser.add_argument("--type", dest="job_type", help="only this job type")
    parser.add_argument("--template", help="only the runs of this cron template")
    parser.add_argument("--created-after", help="RFC3339 time")
    parser.add_argument("--created-before", help="RFC3339 time")


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "status": args.status,
        "job_type": args.job_type,
        "template_id": args.template,
        "created_after": args.created_after,
        "created_before": args.created_before,
    }


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = sub.add_parser("list", help="list jobs, newest first (follows pages)")
    _filters(listing)
    listing.add_argument(
        "--limit", type=common.positive_int, default=100, help="at most this many (100)"
    )
    common.add_common(listing)

    get = sub.add_parser("get", help="one job as it is now")
    get.add_argument("id")
    get.add_argument("--attempts", action="store_true", help="also its attempt history")
    common.add_common(get)

    create = sub.add_parser("create", help="create a job (due now unless --at) or a template")
    create.add_argument("job_type", metavar="TYPE")
    create.add_argument("--tenant", required=True, help="the tenant (tenantId)")
    create.add_argument("--payload", type=common.json_arg, help="a JSON object")
    create.add_argument("--at", help="when it is due (RFC3339); default now")
    create.add_argument("--cron", help="a 5-field expression: create a cron template")
    create.add_argument("--timezone", help="the template's IANA time zone")
    create.add_argument("--key", help="idempotencyKey (default: a random one)")
    create.add_argument("--priority", type=int)
    create.add_argument("--max-attempts", type=int)
    create.add_argument("--wait", type=float, metavar="SECONDS", help="wait until the job is final")
    common.add_common(create)

    cancel = sub.add_parser("cancel", help="cancel jobs by id, or every job matching the filters")
    cancel.add_argument("ids", nargs="*", metavar="ID")
    _filters(cancel)
    common.add_common(cancel)

    retry = sub.add_parser(
        "retry", help="retry dlq/cancelled jobs by id, or every job matching the filters"
    )
    retry.add_argument("ids", nargs="*", metavar="ID")
    retry.add_argument("--payload", type=common.json_arg, help="a replacement payload")
    retry.add_argument("--at", help="when it is due again (RFC3339); default now")
    _filters(retry)
    common.add_common(retry)


def run(args: argparse.Namespace) -> int:
    with common.client_of(args) as client:
        if args.action == "list":
            jobs = client.list(args.tenant, **_selection(args))
            page = list(itertools.islice(jobs, args.limit))
            return common.show(args, page, lambda rows: common.table(rows, JOB_COLUMNS))
        if args.action == "get":
            job: dict[str, Any] = dict(client.get(args.id))
            if args.attempts:
                job["attemptHistory"] = client.attempts(args.id)
            return common.show(args, job, common.fields)
        if args.action == "create":
            created = client.create(
                args.job_type,
                tenant_id=args.tenant,
                payload=args.payload,
                scheduled_at=args.at,
                cron=args.cron,
                idempotency_key=args.key,
                priority=args.priority,
                max_attempts=args.max_attempts,
                timezone=args.timezone,
            )
            if args.wait is not None:
                created = client.wait(created["id"], timeout=args.wait)
            return common.show(args, created, common.fields)
        if args.action in ("cancel", "retry"):
            return _act(client, args)
    raise AssertionError(args.action)


def _act(client: Any, args: argparse.Namespace) -> int:
    if not args.ids:
        if args.tenant is None:
            raise SystemExit(
                f"jobscheduler jobs {args.action}: give job ids, or --tenant and filters"
            )
        bulk = client.bulk_cancel if args.action == "cancel" else client.bulk_retry
        result = bulk(args.tenant, **_selection(args))
        return common.show(args, result, common.fields)
    done = []
    for job_id in args.ids:
        if args.action == "cancel":
            done.append(client.cancel(job_id))
        else:
            done.append(client.retry(job_id, payload=args.payload, scheduled_at=args.at))
    return common.show(args, done, lambda rows: common.table(rows, JOB_COLUMNS))
