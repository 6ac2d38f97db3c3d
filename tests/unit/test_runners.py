"""Handlers obey their time limits on trio and in threads: an ``async def`` on trio, a ``def``
in a thread (opt-in). Timeouts stop the handler; PermanentError dead-letters at once. Worker
processes (the default for ``def``) are ``test_runners_processes.py``'s.

Timing runs in virtual time (``autojump_clock``), and so does a thread handler held past its
timeout: it cannot finish before the time it is waiting for has passed.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import trio
import trio.testing

from jobscheduler import PermanentError
from jobscheduler.bus.local import LocalBus
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import Status
from jobscheduler.handlers import JobContext
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.store import JobStore

from .conftest import DepsFactory, make_job
from .roles_support import REAL_BOUND, processed, queue, raising, registry_of, run_queued, wake_up

# ------------------------------------------------------------- trio and threads (virtual time)


async def test_async_handler_past_its_timeout_is_cancelled_and_the_attempt_fails_and_retries(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    seen: list[tuple[Any, Any]] = []
    cancelled_after: list[float] = []

    async def hang(ctx: JobContext) -> None:
        started = trio.current_time()
        seen.append((ctx.deadline, deps.clock.now()))
        try:
            await trio.sleep_forever()
        finally:
            cancelled_after.append(trio.current_time() - started)

    deps = make_deps(registry=registry_of("hang", hang, timeout="30s"))
    job = make_job(job_type="hang")
    assert await run_queued(deps, store, job) == "retried"

    failed = await store.get(job.id)
    assert failed.status is Status.PENDING
    assert failed.attempts == 1
    assert failed.last_error == "timed out after 30s"
    assert failed.scheduled_at > failed.updated_at  # retried with backoff
    [record] = await store.attempts(job.id)
    assert (record.number, record.outcome) == (1, Outcome.TIMED_OUT)
    assert (record.error_type, record.error_message) == ("HandlerTimeout", "timed out after 30s")
    [(deadline, started_at)] = seen
    assert deadline - started_at == timedelta(seconds=30)
    assert cancelled_after == [30.0]


async def test_async_handler_within_its_timeout_completes(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    async def quick(ctx: JobContext) -> str:
        await trio.sleep(29)
        return "done"

    deps = make_deps(registry=registry_of("quick", quick, timeout="30s"))
    job = make_job(job_type="quick")
    assert await run_queued(deps, store, job) == "completed"


async def test_thread_handler_past_its_timeout_is_abandoned_and_its_job_fails(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    release = threading.Event()
    finished = threading.Event()

    def blocked(ctx: JobContext) -> None:
        release.wait(REAL_BOUND)
        finished.set()

    deps = make_deps(registry=registry_of("blocked", blocked, run_in="thread", timeout="5s"))
    job = make_job(job_type="blocked")
    await queue(deps, store, job)
    try:
        assert await Executor(deps).run(wake_up(job)) == "retried"
        # The thread could not be stopped: it is still running, abandoned.
        assert not finished.is_set()
    finally:
        release.set()
    failed = await store.get(job.id)
    assert (failed.status, failed.attempts, failed.last_error) == (
        Status.PENDING,
        1,
        "timed out after 5s",
    )


async def test_permanent_error_dead_letters_after_one_attempt(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    bus = LocalBus()
    deps = make_deps(
        bus=bus, registry=registry_of("gone", raising(PermanentError, "404 from the CRM"))
    )
    job = make_job(job_type="gone", max_attempts=5)
    assert await run_queued(deps, store, job) == "dlq"

    dead = await store.get(job.id)
    assert (dead.status, dead.attempts) == (Status.DLQ, 1)
    assert dead.last_error == "PermanentError: 404 from the CRM"
    [record] = await store.attempts(job.id)
    assert (record.number, record.outcome, record.error_type) == (
        1,
        Outcome.FAILED,
        "PermanentError",
    )
    assert [letter.job_id for letter in bus.dead_letters] == [job.id]
    assert processed(deps, "gone", "dlq") == 1
