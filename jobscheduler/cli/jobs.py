"""``jobscheduler jobs list|export|get|create|cancel|retry``: look at and act on jobs over the
API (``export``: :mod:`.export`)."""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from typing import Any

from jobscheduler.client import MAX_BULK_IDS, SORTS

from . import common as common
from .export import add_export, export

JOB_COLUMNS = [
    ("ID", "id"),
    ("TENANT", "tenantId"),
    ("TYPE", "jobType"),
    ("STATUS", "status"),
    ("SCHEDULED", "scheduledAt"),
    ("ATTEMPTS", "attempts"),
    ("CRON", "cron"),
]

#: Per action, the request fields it sends -> their flags (an API error names the flag).
_BULK_FLAGS: common.Flags = {
    **{f"filter.{field}": flag for field, flag in common.FILTER_FLAGS.items()},
    "filter.ids": "ID",
    "dryRun": "--dry-run",
}
FLAGS: dict[str, common.Flags] = {
    "list": {
        **common.FILTER_FLAGS,
        "allTenants": "--all-tenants",
        "sort": "--sort",
        "limit": "--limit",
    },
    "export": {
        **common.FILTER_FLAGS,
        "allTenants": "--all-tenants",
        "limit": "--page-size",
        "cursor": "--after",
    },
    "get": {},
    "create": {
        "jobType": "TYPE",
        "tenantId": "--tenant",
        "payload": "--payload",
        "scheduledAt": "--at",
        "cron": "--cron",
        "timezone": "--timezone",
        "idempotencyKey": "--key",
        "priority": "--priority",
        "maxAttempts": "--max-attempts",
    },
    "cancel": _BULK_FLAGS,
    "retry": {**_BULK_FLAGS, "payload": "--payload", "scheduledAt": "--at"},
}

EPILOG = """examples:
  jobscheduler jobs create noop --tenant acme --wait 30
  jobscheduler jobs list --tenant acme --status dlq
  jobscheduler jobs list --all-tenants --status dlq   (an admin key of every tenant)
  jobscheduler jobs list --tenant acme --status pending --sort scheduledAt
  jobscheduler jobs list --tenant acme --key-prefix order-
  jobscheduler jobs export --tenant acme --finished-before 2026-01-01T00:00:00Z -o acme.jsonl
  jobscheduler jobs export --tenant acme -o acme.jsonl --after "$(cat acme.jsonl.cursor)"   (resume)
  jobscheduler jobs get 65f0a1b2c3d4e5f6a7b8c9d0 --json
  jobscheduler jobs retry 65f0a1b2c3d4e5f6a7b8c9d0 --payload '{"message": "again"}'
  jobscheduler jobs cancel --tenant acme --status pending --type noop   (every match)
  jobscheduler jobs retry --tenant acme --status dlq --dry-run   (count, change nothing)
"""


def _filters(parser: argparse.ArgumentParser, *, all_tenants: bool = False) -> None:
    """The job filter's options (``all_tenants``: ``--all-tenants`` too, instead of
    ``--tenant``)."""
    tenants = parser.add_mutually_exclusive_group()
    tenants.add_argument("--tenant", help="the tenant (tenantId)")
    if all_tenants:
        tenants.add_argument(
            "--all-tenants",
            action="store_true",
            help="every tenant's jobs, instead of --tenant (an admin key of every tenant)",
        )
    parser.add_argument("--status", action="append", help="only this status (repeat for several)")
    parser.add_argument("--type", dest="job_type", help="only this job type")
    parser.add_argument("--template", help="only the runs of this cron template")
    parser.add_argument("--created-after", help="RFC3339 time")
    parser.add_argument("--created-before", help="RFC3339 time")
    parser.add_argument(
        "--finished-before", help="RFC3339 time: only jobs that finished before then"
    )
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--key", type=_text, help="only the job with this idempotencyKey")
    keys.add_argument(
        "--key-prefix", type=_text, help="only jobs whose idempotencyKey starts with this"
    )


def _text(text: str) -> str:
    """An argparse type: a non-empty string."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "status": args.status,
        "job_type": args.job_type,
        "template_id": args.template,
        "created_after": args.created_after,
        "created_before": args.created_before,
        "finished_before": args.finished_before,
        "idempotency_key": args.key,
        "idempotency_key_prefix": args.key_prefix,
    }


def _filtered(args: argparse.Namespace) -> bool:
    """Whether any filter beyond ``--tenant`` was given."""
    return any(value is not None for value in _selection(args).values())


def configure(parser: argparse.ArgumentParser) -> None:
    sub = common.add_actions(parser, EPILOG)

    listing = sub.add_parser("list", help="list jobs, newest first (follows pages)")
    _filters(listing, all_tenants=True)
    listing.add_argument(
        "--sort",
        choices=SORTS,
        help="-createdAt (default: newest first), createdAt, scheduledAt (soonest due "
        "first) or -scheduledAt",
    )
    listing.add_argument(
        "--limit", type=common.positive_int, default=100, help="at most this many (100)"
    )
    common.add_common(listing)

    add_export(sub, _filters)

    get = sub.add_parser("get", help="one job as it is now")
    get.add_argument("id")
    get.add_argument("--attempts", action="store_true", help="also its attempt history")
    common.add_common(get)

    create = sub.add_parser("create", help="create a job (due now unless --at) or a template")
    create.add_argument("job_type", metavar="TYPE")
    create.add_argument("--tenant", required=True, help="the tenant (tenantId)")
    create.add_argument("--payload", type=common.json_object, help="a JSON object")
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
    _dry_run(cancel)
    common.add_common(cancel)

    retry = sub.add_parser(
        "retry", help="retry dlq/cancelled jobs by id, or every job matching the filters"
    )
    retry.add_argument("ids", nargs="*", metavar="ID")
    retry.add_argument("--payload", type=common.json_object, help="a replacement payload")
    retry.add_argument("--at", help="when it is due again (RFC3339); default now")
    _filters(retry)
    _dry_run(retry)
    common.add_common(retry)


def _dry_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="only count the jobs the command would act on (changes nothing)",
    )


def run(args: argparse.Namespace) -> int:
    with common.client_of(args) as client:
        if args.action == "list":
            jobs = client.list(
                args.tenant, sort=args.sort, all_tenants=args.all_tenants, **_selection(args)
            )
            page = list(itertools.islice(jobs, args.limit))
            return common.show_table(args, page, JOB_COLUMNS)
        if args.action == "export":
            return export(client, args, _selection(args))
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
    """Ids and filters go as bulk requests (``filter.ids``, at most MAX_BULK_IDS each); one
    id alone, or ids with ``--payload``, use the job's own route (the job is printed)."""
    name = f"jobscheduler jobs {args.action}"
    payload = getattr(args, "payload", None)
    if not args.ids and args.tenant is None:
        raise SystemExit(f"{name}: give job ids, or --tenant and filters")
    if payload is not None and (args.dry_run or not args.ids):
        print(f"{name}: --payload needs job ids and no --dry-run", file=sys.stderr)
        raise SystemExit(2)
    single = len(args.ids) == 1 and not args.dry_run and not _filtered(args)
    if payload is not None or single:
        done = []
        for job_id in args.ids:
            if args.action == "cancel":
                done.append(client.cancel(job_id))
            else:
                done.append(client.retry(job_id, payload=payload, scheduled_at=args.at))
        return common.show_table(args, done, JOB_COLUMNS)
    result = _bulk(client, args, list(dict.fromkeys(args.ids)) or [None])
    return common.show(args, result, common.fields)


def _bulk(client: Any, args: argparse.Namespace, ids: Sequence[str | None]) -> dict[str, Any]:
    """One bulk request per MAX_BULK_IDS ids (one without ids: the filters alone); the
    answers' counts summed."""
    extra = {} if args.action == "cancel" else {"scheduled_at": args.at}
    bulk = client.bulk_cancel if args.action == "cancel" else client.bulk_retry
    total: dict[str, Any] = {}
    for start in range(0, len(ids), MAX_BULK_IDS):
        chunk = [job_id for job_id in ids[start : start + MAX_BULK_IDS] if job_id is not None]
        answer = bulk(
            args.tenant, ids=chunk or None, dry_run=args.dry_run, **extra, **_selection(args)
        )
        for key, value in answer.items():
            summed = isinstance(value, int) and not isinstance(value, bool)
            total[key] = total.get(key, 0) + value if summed else value
    return total
