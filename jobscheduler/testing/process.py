"""The one process supervisor of the tests and the tools: a subprocess that serves HTTP,
from its start to its stop.

A :class:`ServerProcess` spawns ``argv`` with its environment, appending its output to a
log file; waits until it is ready (every health URL answers 200 and, when asked, its log has
a ``ready`` line); and signals, freezes, stops or kills it, remembering whether its owner
did, so that a teardown (:func:`stop_all`) can tell an expected exit from a crash. A process
that fails to start, or does not stop in time, is a :class:`ProcessFailed` that carries the
tail of its log.

The process is a ``subprocess.Popen``, so its owner may also signal it from synchronous
code; its exit is awaited in a worker thread (``Popen.wait``), not polled. Readiness is
polled: nothing in another process can wake us.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import httpx
import trio

#: Bound on a process becoming ready (interpreter start, imports, connections).
STARTUP_TIMEOUT = 45.0
#: Bound on a process exiting after its signal (executors get SHUTDOWN_GRACE first).
STOP_TIMEOUT = 30.0
#: Log lines in a failure's message.
TAIL_LINES = 60
#: The line every jobscheduler process logs at ``info`` once all its roles started.
READY_LINE = r"^\S+ info\s+ready\b"


class ProcessFailed(AssertionError):
    """A supervised process did not become ready, had exited unasked, or did not stop in
    time. An AssertionError: in a test, the system under test misbehaved."""


def at_normal_priority(argv: Sequence[str]) -> list[str]:
    """``argv`` run at niceness 0 even when the caller runs at a higher priority (a test
    process that raised its own, to measure a stack loaded by other work, must not hand that
    priority to the stack it starts: children inherit it)."""
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    if niceness >= 0:
        return list(argv)
    return ["nice", "-n", str(-niceness), *argv]


class ServerProcess:
    """One subprocess serving HTTP: ``argv`` (then :attr:`args`) run with ``env``, its
    output appended to ``log_path``. It is ready once every URL of ``health_urls`` answers
    200 and, with ``ready_line`` (a regular expression, e.g. :data:`READY_LINE`), once a
    line of its log matches."""

    #: Log lines :meth:`tail` leaves out (routine chatter); None keeps every line.
    quiet: re.Pattern[str] | None = None

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str],
        log_path: Path,
        *,
        health_urls: Iterable[str],
        ready_line: str | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        #: Extra command-line arguments after ``argv`` (set before :meth:`spawn`).
        self.args: list[str] = []
        self.env = dict(env)
        self.log_path = log_path
        self.health_urls = list(health_urls)
        self.ready_line = re.compile(ready_line, re.MULTILINE) if ready_line else None
        self.proc: subprocess.Popen[bytes] | None = None
        #: The owner signalled the process (any exit after that is expected).
        self.signalled = False
        #: The owner SIGKILLed the process (a teardown leaves it alone, any exit code goes).
        self.killed = False

    # -- starting ----------------------------------------------------------------------------

    def spawn(self) -> None:
        """Start the process (see :meth:`wait_ready`), at normal priority."""
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                at_normal_priority([*self.argv, *self.args]),
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    async def wait_ready(self, http: httpx.AsyncClient, timeout: float = STARTUP_TIMEOUT) -> None:
        """Poll the health URLs (and the log) until the process is ready; ProcessFailed if
        it exits first or is not ready within ``timeout`` seconds."""
        proc = self._started()
        try:
            with trio.fail_after(timeout):
                while True:
                    if proc.poll() is not None:
                        raise ProcessFailed(
                            f"{self.name} exited with {proc.returncode} during start-up:\n"
                            f"{self.tail()}"
                        )
                    if await self._healthy(http) and self._ready_logged():
                        return
                    await trio.sleep(0.05)
        except trio.TooSlowError:
            raise ProcessFailed(
                f"{self.name} not ready within {timeout}s:\n{self.tail()}"
            ) from None

    async def _healthy(self, http: httpx.AsyncClient) -> bool:
        try:
            for url in self.health_urls:
                if (await http.get(url, timeout=2.0)).status_code != 200:
                    return False
        except httpx.TransportError:
            return False
        return True

    def _ready_logged(self) -> bool:
        return self.ready_line is None or self.ready_line.search(self.log()) is not None

    # -- watching ----------------------------------------------------------------------------

    def _started(self) -> subprocess.Popen[bytes]:
        assert self.proc is not None, f"{self.name} was never spawned"
        return self.proc

    @property
    def pid(self) -> int:
        return self._started().pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exited_on_its_own(self) -> bool:
        """The process ended although its owner did not signal it."""
        return self.proc is not None and self.proc.poll() is not None and not self.signalled

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The last lines of the log, without the :attr:`quiet` ones (the file has all)."""
        kept = self.log().splitlines()
        if self.quiet is not None:
            kept = [line for line in kept if not self.quiet.search(line)]
        return "\n".join(kept[-lines:])

    # -- signalling and stopping -----------------------------------------------------------

    def send(self, sig: int) -> None:
        """Send ``sig`` without waiting (:meth:`stop` waits for the exit); ProcessFailed if
        the process had already exited unasked."""
        proc = self._started()
        if self.exited_on_its_own():
            raise ProcessFailed(
                f"{self.name} had already exited on its own with code {proc.returncode}:\n"
                f"{self.tail()}"
            )
        self.signalled = True
        if proc.poll() is None:
            proc.send_signal(sig)

    def freeze(self) -> None:
        """SIGSTOP: the process keeps its sockets open but does nothing until :meth:`thaw`."""
        self._started().send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._started().send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL and reap; a teardown then leaves this process alone."""
        self.send(signal.SIGKILL)
        self.killed = True
        self._started().wait(10)

    async def wait_exit(self, timeout: float = STOP_TIMEOUT, why: str = "") -> int:
        """Wait for the process to exit and return its exit code. One still running after
        ``timeout`` seconds is SIGKILLed and reported as a ProcessFailed (``why``: what it
        was asked to do, for the message)."""
        proc = self._started()
        with trio.move_on_after(timeout):
            await trio.to_thread.run_sync(proc.wait, abandon_on_cancel=True)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
            raise ProcessFailed(f"{self.name} did not exit within {timeout}s{why}:\n{self.tail()}")
        return proc.returncode

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        """Signal the process (unless its owner already did) and wait for its exit; returns
        its exit code. ProcessFailed if it had exited unasked or does not exit in time."""
        if not self.signalled:
            self.send(sig)
        return await self.wait_exit(timeout, f" of {signal.Signals(sig).name}")

    async def stop_ok(self, sig: int = signal.SIGTERM) -> None:
        """:meth:`stop`, requiring exit code 0."""
        code = await self.stop(sig)
        if code != 0:
            raise ProcessFailed(
                f"{self.name} exited {code} on {signal.Signals(sig).name}:\n{self.tail()}"
            )

    def __repr__(self) -> str:
        return f"<{self.name} pid={self.proc and self.proc.pid}>"


async def stop_all(processes: Iterable[ServerProcess]) -> list[str]:
    """SIGTERM every process still running, all at once, and wait for them; returns one
    problem line per process that had exited unasked, did not stop in time or did not exit
    0. A process its owner SIGKILLed, or that never started, is left alone."""
    problems: list[str] = []

    async def stop(process: ServerProcess) -> None:
        if process.proc is None or process.killed:
            return
        if process.exited_on_its_own():
            problems.append(
                f"{process.name} had exited on its own with code {process.proc.returncode}"
            )
            return
        try:
            code = await process.stop()
        except ProcessFailed as exc:
            problems.append(str(exc).splitlines()[0])
            return
        if code != 0:
            problems.append(f"{process.name} exited {code} on SIGTERM")

    async with trio.open_nursery() as nursery:
        for process in processes:
            nursery.start_soon(stop, process)
    return problems
