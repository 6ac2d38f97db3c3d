"""What the ``jobs``, ``cron`` and ``stats`` commands share: connection options, ``--json``,
tables, and reading JSON arguments."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jobscheduler._argtypes import json_object as json_object
from jobscheduler._argtypes import positive_int as positive_int
from jobscheduler.client._sync import Client

Row = Mapping[str, Any]


def add_common(parser: argparse.ArgumentParser) -> None:
    """``--url``, ``--api-key`` and ``--json`` on a leaf command."""
    parser.add_argument(
        "--url", help="the API (default: JOBSCHEDULER_URL, else http://127.0.0.1:8080)"
    )
    parser.add_argument("--api-key", help="an API key (default: JOBSCHEDULER_API_KEY)")
    parser.add_argument(
        "--json", action="store_true", help="print JSON (for scripts) instead of a table"
    )


def add_actions(
    parser: argparse.ArgumentParser, epilog: str
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Set up a command whose first argument names its action (``jobs list``, ``cron
    pause``): its ``epilog`` printed as written after the help, and the sub-parsers to add
    each action to (one is required; ``args.action`` names it)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = epilog
    return parser.add_subparsers(dest="action", required=True, metavar="ACTION")


#: A request field -> the command line's name for it (``tenantId`` -> ``--tenant``).
Flags = Mapping[str, str]

#: The fields of a job filter (``GET /jobs``'s query, a bulk action's ``filter``) -> flags.
FILTER_FLAGS: Flags = {
    "tenantId": "--tenant",
    "status": "--status",
    "jobType": "--type",
    "templateId": "--template",
    "createdAfter": "--created-after",
    "createdBefore": "--created-before",
    "finishedBefore": "--finished-before",
    "idempotencyKey": "--key",
    "idempotencyKeyPrefix": "--key-prefix",
}


def in_flags(message: str, flags: Flags) -> str:
    """An API error in the command line's terms: the request field it starts with becomes
    the flag that set it (``tenantId is required`` -> ``--tenant is required``,
    ``scheduledAt 2026-12-02T09:00:00 has no time zone`` -> ``--at ...``), and so does every
    other field it names that is not an English word (camelCase or dotted: ``allTenants``)."""
    leading = re.match(r"[A-Za-z_][\w.]*", message)
    if leading and leading.group() in flags:
        message = flags[leading.group()] + message[leading.end() :]
    named = sorted((f for f in flags if f != f.lower() or "." in f), key=len, reverse=True)
    if named:
        pattern = r"(?<![\w.-])(" + "|".join(re.escape(f) for f in named) + r")(=true)?(?![\w.])"
        message = re.sub(pattern, lambda m: flags[m.group(1)], message)
    return message


def client_of(args: argparse.Namespace) -> Client:
    return Client(args.url, api_key=args.api_key)


def emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def table(rows: Iterable[Row], columns: Sequence[tuple[str, str]]) -> None:
    """Print ``rows`` as aligned columns; ``columns`` are (heading, key) pairs."""
    cells = [[_cell(row.get(key)) for _, key in columns] for row in rows]
    headings = [heading for heading, _ in columns]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headings)]
    for line in [headings, *cells]:
        print("  ".join(t.ljust(w) for t, w in zip(line, widths, strict=True)).rstrip())
    if not cells:
        print("(none)")


def fields(row: Row) -> None:
    """Print one resource as ``key  value`` lines."""
    width = max((len(k) for k in row), default=0)
    for key, value in row.items():
        print(f"{key.ljust(width)}  {_cell(value)}")


def show(args: argparse.Namespace, value: Any, human: Callable[[Any], None]) -> int:
    """Print ``value`` as JSON with ``--json``, else with ``human``; exit code 0."""
    if args.json:
        emit_json(value)
    else:
        human(value)
    sys.stdout.flush()
    return 0


def show_table(
    args: argparse.Namespace, rows: Sequence[Row], columns: Sequence[tuple[str, str]]
) -> int:
    """:func:`show` of a list of resources: as JSON with ``--json``, else a :func:`table`."""
    return show(args, rows, lambda value: table(value, columns))
