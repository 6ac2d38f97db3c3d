"""The code blocks of a Markdown page, as a reader pastes them: the docs' e2e tests run these."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import trio

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


# Stop on the first failure and never leave ``dev`` (or anything else started) running.
STRICT_BASH = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"


def copy_of_the_repo(root: Path) -> None:
    """A copy of the repository's layout at ``root``: ``examples/`` (without its runs'
    leftovers) and the virtualenv the docs activate (a link to this one)."""
    root.mkdir()
    shutil.copytree(
        REPO / "examples",
        root / "examples",
        ignore=shutil.ignore_patterns("__pycache__", "data", "outbox.jsonl"),
    )
    (root / ".venv").symlink_to(Path(sys.prefix))


async def run_strict_bash(
    commands: str, *, cwd: Path, env: dict[str, str], log_path: Path, timeout: float
) -> tuple[int | None, str]:
    """Run ``commands`` under :data:`STRICT_BASH` in a session of their own, their output
    (standard and error) to ``log_path``; killed with all they started after ``timeout``.
    Their exit status and output."""
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", STRICT_BASH + commands],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        with trio.move_on_after(timeout):
            while proc.poll() is None:
                await trio.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return proc.returncode, await trio.Path(log_path).read_text()
