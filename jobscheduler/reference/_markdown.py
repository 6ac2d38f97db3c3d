"""Markdown pieces the generated pages share."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

#: The note at the top of every generated page.
HEADER = (
    "<!-- Generated from {source} by `just docs-gen` "
    "(python -m jobscheduler.reference docs): edit the code, not this page. -->"
)


def page_top(title: str, source: str) -> list[str]:
    """The lines every generated page starts with: its title and the :data:`HEADER` naming
    ``source``, each followed by a blank line."""
    return [f"# {title}", "", HEADER.format(source=source), ""]


def cell(text: object) -> str:
    """Text that stays inside one table cell (pipes escaped, lines joined)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(headings: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A Markdown table's lines."""
    lines = [
        "| " + " | ".join(headings) + " |",
        "|" + "|".join("---" for _ in headings) + "|",
    ]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return lines


def first_sentence(doc: str | None) -> str:
    """A docstring's first sentence (its first paragraph when that has no full stop), with
    reStructuredText roles reduced to their text."""
    paragraph = " ".join((doc or "").strip().split("\n\n")[0].split())
    paragraph = re.sub(r":[a-z]+:`~?\.?([^`]+)`", r"`\1`", paragraph).replace("``", "`")
    match = re.match(r"(.+?\.)(\s|$)", paragraph)
    return match.group(1) if match else paragraph
