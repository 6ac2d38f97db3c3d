"""The checker's command line: ``python -m tests.faults.history``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import trio

from jobscheduler.store import JobStore

from . import __doc__ as package_doc
from .run import check_store, parse_reports

# --------------------------------------------------------------------------- command line


async def _main(args: argparse.Namespace) -> int:
    store: JobStore
    if args.sqlite:
        from jobscheduler.store.sqlite import SQLiteJobStore

        store = SQLiteJobStore(args.sqlite)
    else:
        from jobscheduler.store.mongo import MongoJobStore

        store = MongoJobStore(args.mongo_uri, args.database)
    reports = [
        report
        for path in args.log
        for report in parse_reports(await trio.Path(path).read_text(), path)
    ]
    history, violations = await check_store(store, reports)
    print(
        f"{len(history.jobs)} jobs, {sum(map(len, history.attempts.values()))} attempt records, "
        f"{len(history.reports)} reports: {len(violations)} violation(s)"
    )
    return 1 if violations else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults.history", description=(package_doc or "").split("\n\n")[0]
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--sqlite", help="an embedded store's file")
    where.add_argument("--mongo-uri", help="a MongoDB-protocol server")
    parser.add_argument("--database", default="jobscheduler", help="with --mongo-uri")
    parser.add_argument("--log", action="append", default=[], help="an executor's log file")
    return trio.run(_main, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
