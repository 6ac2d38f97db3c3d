"""``jobscheduler audit``: read the audit trail straight from the configured store.

Filters as ``GET /audit``; newest first; ``--before ID`` pages back (the last id printed).
"""

from __future__ import annotations

import argparse
import json

import trio

from jobscheduler.domain.audit import MAX_AUDIT_LIMIT, AuditRecord, audit_to_json, parse_audit_query
from jobscheduler.domain.model import format_time
from jobscheduler.errors import JobSchedulerError

from .keys import add_store_option, failed, open_store, with_store

EPILOG = """\
Examples:
  jobscheduler audit --tenant acme --limit 20
  jobscheduler audit --job 65f0c0ffee0123456789abcd --json
  jobscheduler audit --action "POST /jobs" --since 2026-01-01T00:00:00Z
"""

#: CLI option -> GET /audit query parameter.
_OPTIONS = {
    "tenant": "tenantId",
    "key": "keyId",
    "action": "action",
    "job": "jobId",
    "since": "since",
    "until": "until",
    "before": "before",
    "limit": "limit",
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--tenant", metavar="TENANT")
    parser.add_argument("--key", metavar="KEY_ID", help="records of one API key")
    parser.add_argument("--action", help='e.g. "POST /jobs"')
    parser.add_argument("--job", metavar="JOB_ID")
    parser.add_argument("--since", metavar="RFC3339")
    parser.add_argument("--until", metavar="RFC3339")
    parser.add_argument("--before", metavar="RECORD_ID", help="page back from this record")
    parser.add_argument("--limit", default="50", help=f"at most {MAX_AUDIT_LIMIT} (default 50)")
    parser.add_argument("--json", action="store_true", help="one JSON array")
    add_store_option(parser)


def _line(record: AuditRecord) -> str:
    return "  ".join(
        [
            record.id,
            format_time(record.at),
            record.key_id or "-",
            record.tenant or "-",
            str(record.status),
            record.action,
            record.job_id or "-",
            record.detail or "",
        ]
    ).rstrip()


def run(args: argparse.Namespace) -> int:
    try:
        query = parse_audit_query(
            {param: getattr(args, opt) for opt, param in _OPTIONS.items() if getattr(args, opt)}
        )
        store, _ = open_store(args)
        records = trio.run(with_store, store, lambda s: s.list_audit(query))
    except JobSchedulerError as exc:
        return failed(exc)
    if args.json:
        print(json.dumps([audit_to_json(r) for r in records], indent=2))
    else:
        for record in records:
            print(_line(record))
    return 0
