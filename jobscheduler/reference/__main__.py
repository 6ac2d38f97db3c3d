"""``python -m jobscheduler.reference DOCS_DIR [--check]``: write the generated reference
pages, or (``--check``) exit 1 naming those that are stale."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import generate, stale_pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobscheduler.reference")
    parser.add_argument("docs", type=Path, help="the documentation folder (docs)")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if a page is stale"
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages(args.docs)
        for name in stale:
            print(f"stale: {args.docs / name} (regenerate with `just docs-gen`)", file=sys.stderr)
        return 1 if stale else 0
    for name in generate(args.docs):
        print(f"wrote {args.docs / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
