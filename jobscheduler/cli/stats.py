"""``jobscheduler stats``: counts by status and job type, queue lag, recent outcomes."""

from __future__ import annotations

import argparse
from typing import Any

from . import common as common

#: The request fields it sends -> their flags (an API error names the flag).
FLAGS: dict[str, common.Flags] = {"": {"tenantId": "--tenant"}}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", help="one tenant (default: the key's, or every tenant)")
    common.add_common(parser)


def _human(stats: dict[str, Any]) -> None:
    """Nested counts become ``section  name  value`` rows; scalars are ``name  value``."""
    rows: list[dict[str, Any]] = []
    for key, value in stats.items():
        if isinstance(value, dict):
            rows.extend({"what": key, "name": k, "value": v} for k, v in value.items())
        else:
            rows.append({"what": key, "name": "", "value": value})
    common.table(rows, [("WHAT", "what"), ("NAME", "name"), ("VALUE", "value")])


def run(args: argparse.Namespace) -> int:
    with common.client_of(args) as client:
        return common.show(args, client.stats(args.tenant), _human)
