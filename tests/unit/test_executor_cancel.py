"""Cancelling a running job: the executor's heartbeat reply carries the request, the handler
is stopped in every runner (an ``async def`` cancelled, a worker process killed, a thread
abandoned) and the job ends ``cancelled``, token-fenced. Virtual time for trio and threads;
real time, bounded, for worker processes (see test_runners_processes)."""

from __future__ import annotations

import threading
from pathlib import Path

import trio
import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import Job, Status
from jobscheduler.handlers import JobContext
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.store import JobStore
from tests.support.processes import alive

from .conftest import DepsFactory, make_job
from .roles_support import REAL_BOUND, executor_running, processed, queue, registry_of, wake_up
from .test_runners_processes import sleeper_running


async def request_cancel_when_running(deps: Deps, store: JobStore, job: Job) -> Job:
    """Wait (polling the store) until the job runs, then ask to cancel it."""
    while True:
        current = await store.get(job.id)
        if current.status is Status.RUNNING:
            requested = await store.apply(states.request_cancel(current, now=deps.clock.now()))
            assert requested is not None
            return requested
        await trio.sleep(0.01)


async def run_until_settled(deps: Deps, store: JobStore, job: Job) -> list[str]:
    async with executor_running(Executor(deps), job) as results:
        await request_cancel_when_running(deps, store, job)
    return results


async def test_async_handler_is_cancelled_within_one_heartbeat_and_the_job_ends_cancelled(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    stopped_at: list[float] = []

    async def hang(ctx: JobContext) -> None:
        try:
            await trio.sleep_forever()
        finally:
            stopped_at.append(trio.current_time())

    deps = make_deps(registry=registry_of("hang", hang))  # heartbeat every 10 s
    job = make_job(job_type="hang")
    await queue(deps, store, job)
    started = trio.current_time()
    await run_until_settled(deps, store, job)
    [stopped] = stopped_at
    assert stopped - started <= deps.settings.heartbeat_interval + 1
    cancelled = await store.get(job.id)
    assert (cancelled.status, cancelled.claim_token) == (Status.CANCELLED, None)
    assert cancelled.last_error == "cancelled while running"
    # The attempt started (start counted it) and ended cancelled, not failed.
    assert cancelled.attempts == 1
    [record] = await store.attempts(job.id)
    assert (record.number, record.outcome) == (1, Outcome.CANCELLED)
    assert record.error_type is None
    assert processed(deps, "hang", "cancelled") == 1


async def test_thread_handler_is_abandoned_and_the_job_ends_cancelled(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    release = threading.Event()

    def blocked(ctx: JobContext) -> None:
        release.wait(REAL_BOUND)

    deps = make_deps(registry=registry_of("blocked", blocked, run_in="thread"))
    job = make_job(job_type="blocked")
    await queue(deps, store, job)
    try:
        await run_until_settled(deps, store, job)
    finally:
        release.set()
    assert (await store.get(job.id)).status is Status.CANCELLED


async def test_a_failure_racing_a_cancel_request_ends_cancelled_not_retried(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    async def fails_after_cancel(ctx: JobContext) -> None:
        current = await store.get(ctx.job_id)
        assert await store.apply(states.request_cancel(current, now=deps.clock.now()))
        raise RuntimeError("interrupted")

    deps = make_deps(registry=registry_of("fails-after-cancel", fails_after_cancel))
    job = make_job(job_type="fails-after-cancel", max_attempts=5)
    await queue(deps, store, job)
    assert await Executor(deps).run(wake_up(job)) == "cancelled"
    assert (await store.get(job.id)).status is Status.CANCELLED
    # The failure lost to the cancel request: only the cancelled attempt is recorded.
    assert [(a.number, a.outcome) for a in await store.attempts(job.id)] == [(1, Outcome.CANCELLED)]


async def test_process_handler_is_killed_and_the_job_ends_cancelled(
    make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    async with sleeper_running(make_deps, store, tmp_path) as sleeper:  # it runs in its process
        await request_cancel_when_running(sleeper.deps, store, sleeper.job)
    assert sleeper.results == ["cancelled"]
    assert not alive(sleeper.pid)
    assert (await store.get(sleeper.job.id)).status is Status.CANCELLED
