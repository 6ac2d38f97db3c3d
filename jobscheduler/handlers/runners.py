"""Where handlers run: on trio, in a worker process, or in a worker thread.

The executor owns one :class:`HandlerRunner`; handlers never see it. Every runner obeys
the same stop signals -- the handler's ``timeout``, shutdown, and a lost claim -- each of
which is a trio cancellation of the call:

- ``trio``: the coroutine is cancelled;
- ``process``: the worker process is killed (``trio_parallel``'s ``kill_on_cancel``) and a
  fresh one is started for the next job;
- ``thread``: a thread cannot be interrupted, so it is abandoned -- it runs on until the
  function returns, its result is ignored, and the job is failed or handed back anyway.

An attempt's deadline starts when the handler actually starts: a ``def`` handler waiting
for a free worker process, or for a worker process to start, is not yet timing out.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any

import attrs
import trio
import trio_parallel

from jobscheduler.errors import HandlerError, HandlerTimeout

from .context import JobContext
from .registry import Handler, format_seconds

log = logging.getLogger(__name__)

#: How long idle worker processes get to exit when the executor stops, before SIGKILL.
WORKER_GRACE = 1.0
#: Idle worker processes exit after this long without a job.
WORKER_IDLE_TIMEOUT = 600.0
#: Threads running ``run_in="thread"`` handlers at once, by default (a limiter of their own:
#: an abandoned thread holds its token until it ends, and must not starve other thread users).
THREAD_SLOTS = 40


def _init_worker(level: str, fmt: str, role: str) -> None:
    """Runs first in every worker process: log like the parent (one line per event), and
    ignore SIGTERM (trio_parallel already ignores SIGINT): a stop sent to the whole process
    group (Ctrl-C, systemd) is the parent's to handle -- it kills a worker still running a
    handler at the grace deadline and hands the job back, rather than the worker dying at
    once and the attempt counting as failed."""
    from jobscheduler.observability.logs import configure_logging

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    configure_logging(level, fmt, role)


class _Unlimited:
    """An async context manager that never waits: the runner takes its own process slot
    before the deadline starts, so trio_parallel must not wait for another one."""

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


class HandlerRunner:
    """Runs a handler where its ``run_in`` says, within its ``timeout``."""

    def __init__(
        self,
        *,
        now: Callable[[], datetime],
        workers: Any = None,
        process_slots: int | None = None,
        thread_slots: int | None = None,
    ) -> None:
        """``now`` is the wall clock for ``ctx.deadline``; ``workers`` a trio_parallel
        WorkerContext (None: trio_parallel's default one). At most ``process_slots`` worker
        processes and ``thread_slots`` threads run handlers at once (default: one per CPU,
        and THREAD_SLOTS)."""
        self._now = now
        self._workers = workers
        self._process_slots = trio.CapacityLimiter(process_slots or os.cpu_count() or 1)
        self._thread_slots = trio.CapacityLimiter(thread_slots or THREAD_SLOTS)

    async def run(self, handler: Handler, ctx: JobContext) -> Any:
        """Call the handler with ``ctx`` and return what it returns.

        Raises what the handler raises, or HandlerTimeout when it ran past its timeout (it
        has been stopped, or for a thread abandoned). Cancellation from outside (shutdown,
        lost claim) stops it the same way and propagates.
        """
        if handler.run_in == "process":
            async with self._process_slots:
                await self._warm_worker()
                return await self._within_timeout(handler, ctx, self._in_process)
        return await self._within_timeout(handler, ctx, self._call)

    async def _warm_worker(self) -> None:
        """Start a worker process, if none is idle, before the handler's deadline starts.

        Workers start lazily, and a fresh one replaces each worker killed at a timeout: its
        start (a Python process importing the user's app) can take longer than a short
        ``timeout`` on a loaded machine, and it is not the handler's time. The warm-up
        returns the worker idle, and the handler's call takes it (the pool hands out the
        most recently idle worker first).
        """
        if self._workers is None or self._workers.statistics().idle_workers:
            return
        await self._workers.run_sync(_warm_up, kill_on_cancel=True, limiter=_Unlimited())

    async def _within_timeout(
        self,
        handler: Handler,
        ctx: JobContext,
        call: Callable[[Handler, JobContext], Any],
    ) -> Any:
        timeout = handler.timeout
        if timeout is None:
            return await call(handler, ctx)
        ctx = attrs.evolve(ctx, deadline=self._now() + timedelta(seconds=timeout))
        with trio.move_on_after(timeout) as scope:
            return await call(handler, ctx)
        if scope.cancelled_caught:
            raise HandlerTimeout(f"timed out after {format_seconds(timeout)}")
        raise AssertionError("unreachable")  # pragma: no cover

    async def _call(self, handler: Handler, ctx: JobContext) -> Any:
        if handler.run_in == "trio":
            return await handler.func(ctx)
        return await trio.to_thread.run_sync(
            _thread_body, handler.func, ctx, abandon_on_cancel=True, limiter=self._thread_slots
        )

    async def _in_process(self, handler: Handler, ctx: JobContext) -> Any:
        run_sync = self._workers.run_sync if self._workers is not None else trio_parallel.run_sync
        try:
            return await run_sync(handler.func, ctx, kill_on_cancel=True, limiter=_Unlimited())
        except trio_parallel.BrokenWorkerError as exc:
            raise HandlerError(f"worker process died: {exc}") from exc


def _warm_up() -> None:
    """Run in a fresh worker process so that it is started (and its app imported)."""


def _thread_body(func: Callable[[JobContext], Any], ctx: JobContext) -> Any:
    """The thread runner's call (a named function, so an abandoned thread is recognisable)."""
    return func(ctx)


@asynccontextmanager
async def open_runner(
    *,
    now: Callable[[], datetime],
    log_level: str,
    log_format: str,
    role: str,
    process_slots: int | None = None,
) -> AsyncIterator[HandlerRunner]:
    """A runner with its own worker-process pool, shut down when the block ends.

    Worker processes start lazily (only ``def`` handlers need them), log like this process,
    and are killed if still busy when the block ends.
    """
    init = functools.partial(_init_worker, log_level, log_format, role)
    try:
        async with trio_parallel.open_worker_context(
            init=init, grace_period=WORKER_GRACE, idle_timeout=WORKER_IDLE_TIMEOUT
        ) as workers:
            yield HandlerRunner(now=now, workers=workers, process_slots=process_slots)
    except trio_parallel.BrokenWorkerError as exc:
        # Raised only by the closing shutdown: an idle worker that did not exit within
        # WORKER_GRACE was killed. Nothing was running in it, so nothing is lost.
        log.warning("idle worker process killed at shutdown", extra={"error": str(exc)})


__all__ = ["HandlerRunner", "open_runner"]
