"""Watching the processes a test starts indirectly (a handler's worker, a role): their pid
as written to a file, whether they still run, whether they end in time."""

from __future__ import annotations

import os
from pathlib import Path

import trio


def alive(pid: int) -> bool:
    """The process runs (a zombie, killed and not yet reaped by its parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


async def ends_within(pid: int, seconds: float) -> bool:
    """Whether the process stops running within ``seconds`` (a kill takes effect soon, not
    at once, on a loaded machine)."""
    with trio.move_on_after(seconds):
        while alive(pid):  # another process: nothing to wait on but polling
            await trio.sleep(0.05)
        return True
    return False


async def pid_from(path: Path, timeout: float = 30.0) -> int:
    """The pid a process wrote to ``path`` (polled: nothing in that process can wake us)."""
    file = trio.Path(path)
    with trio.fail_after(timeout):
        while not await file.exists() or not await file.read_text():
            await trio.sleep(0.05)
    return int(await file.read_text())
