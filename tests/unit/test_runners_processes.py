"""Handlers in worker processes (the default for a ``def``) obey their time limits: a
timeout, a lost claim and a drain each stop the handler (its process killed); a process that
dies fails its attempt; PermanentError dead-letters at once.

Worker processes take real time to start, and virtual time would leap over a handler's
timeout while one starts, so these tests run on the real clock, bounded by ``fail_after``,
and assert outcomes (the job's state, the worker process gone), never durations.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing
import trio_parallel

from jobscheduler import PermanentError
from jobscheduler.bus.local import LocalBus
from jobscheduler.domain.model import Job, Status
from jobscheduler.handlers import JobContext
from jobscheduler.handlers.runners import HandlerRunner, open_runner
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.roles.executor.role import run_executor
from jobscheduler.roles.executor.run import handler_logger
from jobscheduler.store import JobStore
from tests.support.processes import alive, pid_from

from .conftest import DepsFactory, make_clock, make_job, make_settings
from .roles_support import (
    REAL_BOUND,
    executor_running,
    processed,
    queue,
    recover_running,
    registry_of,
    run_queued,
    wake_up,
)

# ------------------------------------------------------------- process handlers
# Module level: a worker process imports them by name.


def sleep_in_process(ctx: JobContext) -> None:
    """Writes its pid to ``payload.pidFile``, then sleeps far longer than any test."""
    Path(ctx.payload["pidFile"]).write_text(str(os.getpid()))
    time.sleep(600)


def report_process(ctx: JobContext) -> dict[str, Any]:
    ctx.logger.info("reporting from a worker process")
    return {
        "pid": os.getpid(),
        "logger": ctx.logger.logger.name,
        "extra": dict(ctx.logger.extra or {}),
        "deadline": ctx.deadline,
        "attempt": ctx.attempt,
        "payload": dict(ctx.payload),
    }


def worker_signals_and_logging(ctx: JobContext) -> dict[str, Any]:
    root = logging.getLogger()
    return {
        "sigterm_ignored": signal.getsignal(signal.SIGTERM) == signal.SIG_IGN,
        "log_level": logging.getLevelName(root.level),
        "handlers": len(root.handlers),
    }


def sleep_briefly(ctx: JobContext) -> float:
    time.sleep(float(ctx.payload["seconds"]))
    return time.monotonic()


def crash_process(ctx: JobContext) -> None:
    os._exit(3)


def permanent_in_process(ctx: JobContext) -> None:
    raise PermanentError(f"no such user {ctx.payload.get('user')!r}")


# ------------------------------------------------------------- helpers


# ------------------------------------------------------------- helpers


def context_of(job: Job) -> JobContext:
    """The context a handler receives for ``job``'s first attempt."""
    return JobContext(
        job_id=job.id,
        tenant_id=job.tenant_id,
        job_type=job.job_type,
        payload=job.payload,
        attempt=1,
        max_attempts=3,
        logger=handler_logger(job),
    )


@attrs.frozen
class Sleeper:
    """A job of :func:`sleep_in_process` running: its Deps, its pid, and the list its
    executor's result is appended to."""

    deps: Deps
    job: Job
    pid: int
    results: list[str]


@asynccontextmanager
async def sleeper_running(
    make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> AsyncIterator[Sleeper]:
    """A job of :func:`sleep_in_process` queued and run by an executor that heartbeats every
    0.1 s, the block entered once the handler runs in its process (its pid written); on
    leaving, the executor's result is waited for (all bounded by :data:`REAL_BOUND`)."""
    deps = make_deps(
        registry=registry_of("sleepy", sleep_in_process),
        settings=make_settings(tmp_path, heartbeat_interval=0.1),
    )
    pid_file = tmp_path / "pid"
    job = make_job(job_type="sleepy", payload={"pidFile": str(pid_file)})
    await queue(deps, store, job)
    with trio.fail_after(REAL_BOUND):
        async with executor_running(Executor(deps), job) as results:
            pid = await pid_from(pid_file, REAL_BOUND)
            yield Sleeper(deps=deps, job=job, pid=pid, results=results)


# ------------------------------------------------------------- worker processes (real time)


async def test_process_handler_runs_in_another_process_with_a_picklable_context(
    tmp_path: Path,
) -> None:
    registry = registry_of("report", report_process, timeout="60s")
    clock = make_clock()
    job = make_job(job_type="report", payload={"n": 1})
    ctx = context_of(job)
    with trio.fail_after(REAL_BOUND):
        result = await HandlerRunner(now=clock.now).run(registry.get("report"), ctx)
    assert result["pid"] != os.getpid()
    assert result["logger"] == "jobscheduler.handler"
    assert result["extra"] == {"job_id": job.id, "tenant": "tenant-a", "job_type": "report"}
    assert result["deadline"] is not None
    assert (result["attempt"], result["payload"]) == (1, {"n": 1})


async def test_the_executors_worker_processes_log_like_it_and_leave_sigterm_to_it() -> None:
    registry = registry_of("report", worker_signals_and_logging)
    ctx = context_of(make_job(job_type="report"))
    clock = make_clock()
    with trio.fail_after(REAL_BOUND):
        async with open_runner(
            now=clock.now, log_level="WARNING", log_format="json", role="executor-worker"
        ) as runner:
            result = await runner.run(registry.get("report"), ctx)
    assert result == {"sigterm_ignored": True, "log_level": "WARNING", "handlers": 1}


async def test_a_def_handler_waiting_for_a_worker_process_is_not_yet_timing_out() -> None:
    registry = registry_of("brief", sleep_briefly, timeout="1s")
    first = registry_of("long", sleep_briefly).get("long")
    clock = make_clock()
    runner = HandlerRunner(now=clock.now, process_slots=1)
    results: dict[str, Any] = {}

    def ctx_for(job_type: str, seconds: float) -> JobContext:
        return context_of(make_job(job_type=job_type, payload={"seconds": seconds}))

    async def run(name: str, handler: Any, ctx: JobContext) -> None:
        results[name] = await runner.run(handler, ctx)

    with trio.fail_after(REAL_BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "long", first, ctx_for("long", 2.0))
            await trio.sleep(0.2)  # let "long" take the only worker slot first
            # Waits about 2 s for the slot, longer than its 1 s timeout: still completes.
            nursery.start_soon(run, "brief", registry.get("brief"), ctx_for("brief", 0.0))
    assert results["brief"] >= results["long"]  # it ran only after the long one ended


def slow_worker_start() -> None:
    """A worker process's init that takes longer than the handler's timeout (an app with
    heavy imports on a loaded machine)."""
    time.sleep(1.5)


async def test_a_def_handler_waiting_for_its_worker_process_to_start_is_not_yet_timing_out() -> (
    None
):
    registry = registry_of("brief", sleep_briefly, timeout="1s")
    clock = make_clock()
    ctx = context_of(make_job(job_type="brief", payload={"seconds": 0.0}))
    with trio.fail_after(REAL_BOUND):
        async with trio_parallel.open_worker_context(init=slow_worker_start) as workers:
            runner = HandlerRunner(now=clock.now, workers=workers, process_slots=1)
            # The first job starts the worker (1.5 s), longer than its 1 s timeout.
            assert await runner.run(registry.get("brief"), ctx) > 0


async def test_process_handler_past_its_timeout_is_killed_and_the_attempt_fails(
    make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    # The timeout covers the worker's import of this module before the handler's first line
    # (a second or more on a loaded machine): long enough that the handler has written its
    # pid by the time it is killed.
    deps = make_deps(registry=registry_of("sleepy", sleep_in_process, timeout="5s"))
    pid_file = tmp_path / "pid"
    job = make_job(job_type="sleepy", payload={"pidFile": str(pid_file)})
    with trio.fail_after(REAL_BOUND):
        assert await run_queued(deps, store, job) == "retried"

    failed = await store.get(job.id)
    assert (failed.status, failed.attempts) == (Status.PENDING, 1)
    assert failed.last_error == "timed out after 5s"
    assert not alive(int(pid_file.read_text()))


async def test_a_worker_process_that_dies_fails_the_attempt_and_the_next_job_gets_a_new_one(
    make_deps: DepsFactory, store: JobStore
) -> None:
    registry = registry_of("crash", crash_process)
    registry.register("report", report_process)
    deps = make_deps(registry=registry)
    crash, after = make_job(job_type="crash"), make_job(job_type="report")
    await queue(deps, store, crash)
    executor = Executor(deps)
    with trio.fail_after(REAL_BOUND):
        assert await executor.run(wake_up(crash)) == "retried"
        await queue(deps, store, after)
        assert await executor.run(wake_up(after)) == "completed"
    failed = await store.get(crash.id)
    assert failed.last_error is not None
    assert failed.last_error.startswith("HandlerError: worker process died")


async def test_process_handler_raising_permanent_error_dead_letters_at_once(
    make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps(registry=registry_of("permanent", permanent_in_process))
    job = make_job(job_type="permanent", max_attempts=4, payload={"user": "ada"})
    with trio.fail_after(REAL_BOUND):
        assert await run_queued(deps, store, job) == "dlq"
    dead = await store.get(job.id)
    assert (dead.status, dead.attempts) == (Status.DLQ, 1)
    assert dead.last_error == "PermanentError: no such user 'ada'"


async def test_process_handler_whose_claim_is_lost_is_killed_and_its_outcome_discarded(
    make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    async with sleeper_running(make_deps, store, tmp_path) as sleeper:
        # The reaper takes the job back, as if the heartbeats had stopped arriving.
        recovered = await recover_running(sleeper.deps, store, sleeper.job)

    assert sleeper.results == ["stale"]
    assert not alive(sleeper.pid)
    assert await store.get(sleeper.job.id) == recovered  # the killed attempt wrote nothing


async def test_draining_executor_kills_a_process_handler_at_the_grace_and_hands_its_job_back(
    make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    bus = LocalBus()
    deps = make_deps(
        bus=bus,
        registry=registry_of("sleepy", sleep_in_process),
        settings=make_settings(tmp_path, shutdown_grace=0.5),
    )
    pid_file = tmp_path / "pid"
    job = make_job(job_type="sleepy", attempts=1, payload={"pidFile": str(pid_file)})
    await queue(deps, store, job)
    drain = trio.Event()

    with trio.fail_after(REAL_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_executor, deps, ["sleepy"], drain)
            await bus.publish([wake_up(job)])
            pid = await pid_from(pid_file, REAL_BOUND)
            drain.set()  # run_executor returns once the handler is stopped

    released = await store.get(job.id)
    assert (released.status, released.attempts, released.claim_token) == (
        Status.PENDING,
        1,
        None,
    )
    assert not alive(pid)
    assert processed(deps, "sleepy", "released") == 1
