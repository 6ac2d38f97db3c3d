"""``jobscheduler flow limits|set-limits|weights|set-weight|held``: flow control over the
HTTP API (an admin key; ``held`` a reader's).

``limits`` shows each job type's limits (its handler's) and the tenants' overrides;
``set-limits TYPE --tenant T --concurrency 2 --rate-limit 10/s`` overrides them in one tenant
(no limit given: back to the handler's); ``set-weight TENANT N`` sets a tenant's share of the
claims (an admin key of every tenant); ``held`` lists what the leader holds back, busiest
first.
"""

from __future__ import annotations

import argparse
from typing import Any

from . import common as common

#: Per action, the request fields it sends -> their flags (an API error names the flag).
FLAGS: dict[str, common.Flags] = {
    "limits": {"tenantId": "--tenant"},
    "set-limits": {
        "tenantId": "--tenant",
        "jobType": "TYPE",
        "concurrency": "--concurrency",
        "maxRunning": "--max-running",
        "rateLimit": "--rate-limit",
        "keyRateLimit": "--key-rate-limit",
        "burst": "--burst",
    },
    "weights": {},
    "set-weight": {"weight": "WEIGHT"},
    "held": {"tenantId": "--tenant", "limit": "--limit"},
}

EPILOG = """\
Examples:
  jobscheduler flow limits
  jobscheduler flow set-limits send-email --tenant acme --concurrency 2 --rate-limit 10/s
  jobscheduler flow set-weight acme 3
  jobscheduler flow held --tenant acme
"""


def configure(parser: argparse.ArgumentParser) -> None:
    sub = common.add_actions(parser, EPILOG)
    limits = sub.add_parser("limits", help="the job types' limits and the tenants' overrides")
    limits.add_argument("--tenant", help="one tenant's overrides (default: the key's)")
    common.add_common(limits)
    put = sub.add_parser("set-limits", help="override a job type's limits in one tenant")
    put.add_argument("job_type", metavar="TYPE")
    put.add_argument("--tenant", help="the tenant (default: the key's)")
    put.add_argument("--concurrency", type=common.positive_int, help="jobs at once per key")
    put.add_argument("--max-running", type=common.positive_int, help="jobs of the type at once")
    put.add_argument("--rate-limit", help="starts of the type, e.g. 100/s or 10/m")
    put.add_argument("--key-rate-limit", help="starts per concurrency key, e.g. 10/m")
    put.add_argument("--burst", type=common.positive_int, help="starts at once after a pause")
    common.add_common(put)
    weights = sub.add_parser("weights", help="the tenants' weights")
    common.add_common(weights)
    weight = sub.add_parser("set-weight", help="set a tenant's weight (1: the default)")
    weight.add_argument("tenant", metavar="TENANT")
    weight.add_argument("weight", metavar="WEIGHT", type=common.positive_int)
    common.add_common(weight)
    held = sub.add_parser("held", help="what the leader holds back, busiest first")
    held.add_argument("--tenant", help="one tenant (default: the key's, or every tenant)")
    held.add_argument("--limit", type=common.positive_int, default=10, help="most rows (10)")
    common.add_common(held)


def _limits(value: dict[str, Any]) -> None:
    rows = [{"tenant": "(handler)", "type": t, **v} for t, v in value["defaults"].items()]
    rows += [
        {"tenant": o["tenantId"], "type": o["jobType"], **o["effective"]}
        for o in value["overrides"]
    ]
    common.table(
        rows,
        [
            ("TENANT", "tenant"),
            ("TYPE", "type"),
            ("CONCURRENCY", "concurrency"),
            ("MAX RUNNING", "maxRunning"),
            ("RATE", "rateLimit"),
            ("KEY RATE", "keyRateLimit"),
            ("BURST", "burst"),
        ],
    )


def _weights(value: dict[str, Any]) -> None:
    common.table(value["weights"], [("TENANT", "tenantId"), ("WEIGHT", "weight")])


def _held(value: dict[str, Any]) -> None:
    common.table(
        value["holds"],
        [("TENANT", "tenantId"), ("TYPE", "jobType"), ("WAITING", "waiting"), ("WHY", "text")],
    )


def run(args: argparse.Namespace) -> int:
    with common.client_of(args) as client:
        if args.action == "limits":
            return common.show(args, client.flow_limits(args.tenant), _limits)
        if args.action == "set-limits":
            stored = client.put_flow_limits(
                args.job_type,
                args.tenant,
                concurrency=args.concurrency,
                max_running=args.max_running,
                rate_limit=args.rate_limit,
                key_rate_limit=args.key_rate_limit,
                burst=args.burst,
            )
            return common.show(args, stored, common.fields)
        if args.action == "weights":
            return common.show(args, client.flow_weights(), _weights)
        if args.action == "set-weight":
            stored = client.put_flow_weight(args.tenant, args.weight)
            return common.show(args, stored, common.fields)
        return common.show(args, client.flow_held(args.tenant, args.limit), _held)
