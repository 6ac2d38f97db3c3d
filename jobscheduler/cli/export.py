"""``jobscheduler jobs export``: stream matching jobs as JSON Lines, resumable.

The filters are ``jobs list``'s (``--finished-before`` included: the jobs a retention is
about to prune). Each job is one line, as ``GET /jobs/{id}`` shows it, written a page at a
time to stdout or ``--output FILE`` (appended to, so a resumed export continues the file).
After each page is written (and, into a file, flushed to disk) the cursor of the next one
is printed to stderr (``cursor: ...``) and, with ``--output``, kept in ``FILE.cursor``;
``--after CURSOR`` resumes there. An export stopped between a page's lines and its cursor
repeats that page when resumed, never skips one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from jobscheduler.client import Client
from jobscheduler.client import _operations as operations
from jobscheduler.client._call import Call, Paged

from . import common

#: Jobs per page asked of the API.
PAGE_SIZE = 1000


def add_export(sub: Any, filters: Any) -> None:
    """The ``export`` action, with ``filters`` (``jobs list``'s filter options) added."""
    export = sub.add_parser("export", help="stream matching jobs as JSON Lines (resumable)")
    filters(export, all_tenants=True)
    export.add_argument("--output", "-o", metavar="FILE", help="append to FILE (default: stdout)")
    export.add_argument("--after", metavar="CURSOR", help="resume after this cursor")
    export.add_argument(
        "--page-size", type=common.positive_int, default=PAGE_SIZE, help="jobs per request"
    )
    common.add_common(export)


def cursor_file(output: str) -> Path:
    return Path(f"{output}.cursor")


@contextlib.contextmanager
def _sink(output: str | None) -> Iterator[IO[str]]:
    if output is None:
        yield sys.stdout
        return
    with open(output, "a", encoding="utf-8") as handle:
        yield handle


def _durable(handle: IO[str]) -> None:
    handle.flush()
    if handle is not sys.stdout:
        os.fsync(handle.fileno())


def export(client: Client, args: argparse.Namespace, selection: dict[str, Any]) -> int:
    """Write every matching job (see the module docstring); the exit code."""
    call: Call[Paged[Any]] | None = operations.pages(
        args.tenant,
        all_tenants=args.all_tenants,
        page_size=args.page_size,
        cursor=args.after,
        **selection,
    )
    written = 0
    with _sink(args.output) as out:
        while call is not None:
            # One page at a time, by hand: its cursor is kept (the client's own page loop
            # does not hand cursors out).
            page = client._send(call)
            out.writelines(
                json.dumps(job, separators=(",", ":"), ensure_ascii=False) + "\n"
                for job in page.items
            )
            _durable(out)
            written += len(page.items)
            cursor = page.cursor
            if cursor is not None:
                if args.output is not None:
                    marker = cursor_file(args.output)
                    marker.with_suffix(".tmp").write_text(cursor + "\n")
                    os.replace(marker.with_suffix(".tmp"), marker)
                print(f"cursor: {cursor}", file=sys.stderr)
            call = page.next
    if args.output is not None:
        cursor_file(args.output).unlink(missing_ok=True)
    print(f"exported {written} jobs", file=sys.stderr)
    return 0
