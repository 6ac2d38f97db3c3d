"""The code blocks of a Markdown page, as a reader pastes them: the docs' e2e tests run these."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _section(text: str, heading: str) -> str:
    """The lines under ``heading`` (any level) up to the next heading of the same or a higher
    level; a ``#`` inside a fenced block is a comment, not a heading."""
    lines, level, fenced = [], 0, False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        hashes = len(line) - len(line.lstrip("#")) if not fenced else 0
        is_heading = hashes > 0 and line[hashes : hashes + 1] == " "
        if level and is_heading and hashes <= level:
            break
        if level:
            lines.append(line)
        elif is_heading and line[hashes + 1 :].rstrip("\n") == heading:
            level = hashes
    assert level, f"no heading {heading!r}"
    return "".join(lines)


def doc_blocks(page: str, language: str, section: str | None = None) -> list[str]:
    """The ``language`` fenced blocks of ``page`` (a path from the repository's root), in
    order; only those under the heading ``section`` when one is given."""
    text = (REPO / page).read_text()
    if section is not None:
        text = _section(text, section)
    return [str(block) for block in re.findall(rf"```{language}\n(.*?)```", text, re.DOTALL)]
