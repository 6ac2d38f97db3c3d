"""Watching the processes a test starts: their pid as written to a file (a handler's worker),
whether they still run, whether they end in time, what they logged, a timed SIGTERM of a
supervised one; and running the command line."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import trio

from jobscheduler.testing import ServerProcess

#: What :func:`run_cli` returns.
CompletedCli = subprocess.CompletedProcess[str]


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


async def until_logged(process: ServerProcess, text: str, timeout: float = 10.0) -> None:
    """Wait until ``text`` appears in the process's log (polled: another process)."""
    with trio.fail_after(timeout):
        while text not in process.log():
            await trio.sleep(0.02)


async def sigterm_within(process: ServerProcess, seconds: float) -> float:
    """SIGTERM the process and require it to exit 0 within ``seconds``; returns the seconds
    the exit took (a further SIGTERM after one already sent is what a second Ctrl-C does)."""
    started = time.monotonic()
    process.send(signal.SIGTERM)
    code = await process.wait_exit(seconds, " of SIGTERM")
    elapsed = time.monotonic() - started
    assert code == 0, f"{process.name} exited {code} on SIGTERM:\n{process.tail()}"
    assert elapsed < seconds
    return elapsed


def run_command(
    argv: Sequence[str], *, env: Mapping[str, str], timeout: float = 60.0, cwd: Path | None = None
) -> CompletedCli:
    """Run ``argv`` with exactly ``env`` (in ``cwd``), its output captured as text."""
    return subprocess.run(
        list(argv),
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_cli(*args: str, env: Mapping[str, str], timeout: float = 60.0) -> CompletedCli:
    """``python -m jobscheduler <args>`` with exactly ``env``, its output captured as text."""
    return run_command([sys.executable, "-m", "jobscheduler", *args], env=env, timeout=timeout)


async def run_cli_in_thread(
    *args: str, env: Mapping[str, str], timeout: float = 60.0
) -> CompletedCli:
    """:func:`run_cli` in a worker thread (the test's other tasks and servers go on)."""
    return await trio.to_thread.run_sync(
        functools.partial(run_cli, *args, env=env, timeout=timeout)
    )
