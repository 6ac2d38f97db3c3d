"""The executor: running handlers, retries and backoff, heartbeats, releasing on
cancellation, and the roles together; settling wake-ups against the store is in
test_roles_executor_settling.py (see ``roles_support`` for the clocks)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import trio
import trio.testing

from jobscheduler.bus.base import DeadLetter
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import Change
from jobscheduler.handlers import JobContext, default_registry
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.roles.executor.role import run_executor
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store.base import JobStore

from .conftest import BASE, DepsFactory, make_job, make_settings
from .roles_support import (
    LOOP_BOUND,
    REAL_BOUND,
    TERM,
    ObservedBus,
    executor_running,
    hanging_handler,
    processed,
    queue,
    recover_running,
    registry_with,
    status_of,
    wake_up,
)
from .store_double import ProxyStore


async def test_failing_handler_retries_with_backoff_then_dead_letters(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    calls: list[tuple[int, int]] = []

    async def boom(ctx: JobContext) -> None:
        calls.append((ctx.attempt, ctx.max_attempts))
        await trio.lowlevel.checkpoint()
        raise RuntimeError("kaput")

    bus = ObservedBus()
    deps = make_deps(bus=bus, registry=registry_with(boom=boom))
    executor = Executor(deps)
    job = make_job(job_type="boom", max_attempts=2)
    await queue(deps, store, job)

    assert await executor.run(wake_up(job)) == "retried"
    retried = await store.get(job.id)
    assert retried.status is Status.PENDING
    assert retried.attempts == 1
    assert retried.last_error == "RuntimeError: kaput"
    assert retried.claim_token is None
    assert retried.scheduled_at == retried.updated_at + timedelta(seconds=2)

    # The retry is claimable at its backoff time, not a millisecond before.
    just_before = retried.scheduled_at - timedelta(milliseconds=1)
    assert await store.claim_due(just_before, 10) == []
    assert [j.id for j in await store.claim_due(retried.scheduled_at, 10)] == [job.id]

    assert await executor.run(wake_up(job)) == "dlq"
    dead = await store.get(job.id)
    assert dead.status is Status.DLQ
    assert dead.attempts == 2
    assert dead.last_error == "RuntimeError: kaput"
    assert list(bus.dead_letters) == [
        DeadLetter(
            job_id=job.id,
            job_type="boom",
            tenant_id="tenant-a",
            attempts=2,
            last_error="RuntimeError: kaput",
        )
    ]
    assert calls == [(1, 2), (2, 2)]
    for result in ("retried", "dlq"):
        assert processed(deps, "boom", result) == 1
    assert await store.claim_due(dead.updated_at + timedelta(days=1), 10) == []


async def test_successful_handler_completes_the_job_and_drops_the_token(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    contexts: list[JobContext] = []

    async def record(ctx: JobContext) -> dict[str, int]:
        contexts.append(ctx)
        await trio.lowlevel.checkpoint()
        return {"sent": 3}

    deps = make_deps(registry=registry_with(record=record))
    job = make_job(job_type="record", payload={"x": [1]}, tenant="tenant-z")
    await queue(deps, store, job)

    assert await Executor(deps).run(wake_up(job)) == "completed"

    done = await store.get(job.id)
    assert done.status is Status.COMPLETED
    assert done.claim_token is None
    assert done.claimed_by == "worker-test"
    assert done.claimed_at is not None
    assert done.attempts == 1  # attempts started, as the handler's ctx.attempt said
    assert done.result == {"sent": 3}
    [ctx] = contexts
    assert (ctx.job_id, ctx.tenant_id, ctx.job_type) == (job.id, "tenant-z", "record")
    assert ctx.payload == {"x": [1]}
    assert (ctx.attempt, ctx.max_attempts) == (1, 3)
    assert (ctx.idempotency_key, ctx.scheduled_at) == (job.idempotency_key, job.scheduled_at)
    assert ctx.template_id is None
    [attempt] = await store.attempts(job.id)
    assert (attempt.number, attempt.outcome, attempt.worker) == (
        1,
        Outcome.COMPLETED,
        "worker-test",
    )
    assert attempt.started_at == done.claimed_at  # no time passed during the pick
    assert processed(deps, "record", "completed") == 1


class SlowWrites(ProxyStore):
    """Each batch of writes waits ``delay`` seconds before it is applied (behind others)."""

    def __init__(self, inner: JobStore, delay: float) -> None:
        super().__init__(inner)
        self.delay = delay

    async def apply_many(self, changes: Sequence[Change]) -> list[Job | None]:
        await trio.sleep(self.delay)
        return await self.inner.apply_many(changes)


async def test_a_stale_wake_up_whose_pick_lands_late_records_the_attempt_when_it_began(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    # A duplicate wake-up of a job waiting for its retry; its pick waits behind other
    # writes until the job is due and queued again, then takes it: the attempt began then.
    deps = make_deps(store=SlowWrites(store, delay=5.0))
    job = make_job(scheduled_at=BASE + timedelta(seconds=2))
    await store.insert(job)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(Executor(deps).run, wake_up(job))
        await trio.sleep(3)
        assert [j.id for j in await store.claim_due(deps.clock.now(), 10)] == [job.id]
    done = await store.get(job.id)
    [attempt] = await store.attempts(job.id)
    assert (done.status, attempt.outcome) == (Status.COMPLETED, Outcome.COMPLETED)
    assert attempt.started_at is not None
    assert attempt.started_at >= done.scheduled_at + timedelta(seconds=3)


async def test_sync_handlers_with_run_in_thread_run_in_a_worker_thread(
    make_deps: DepsFactory, store: JobStore
) -> None:
    # Real time: the handlers finish on their own in a real thread, which virtual time
    # would race.
    threads: list[int] = []

    def blocking(ctx: JobContext) -> None:
        threads.append(threading.get_ident())

    def blocking_fail(ctx: JobContext) -> None:
        raise ValueError("sync failure")

    registry = default_registry()
    registry.register("blocking", blocking, run_in="thread")
    registry.register("blocking-fail", blocking_fail, run_in="thread")
    deps = make_deps(registry=registry)
    ok, bad = make_job(job_type="blocking"), make_job(job_type="blocking-fail")
    await queue(deps, store, ok, bad)
    executor = Executor(deps)

    with trio.fail_after(REAL_BOUND):
        assert await executor.run(wake_up(ok)) == "completed"
        assert await executor.run(wake_up(bad)) == "retried"

    assert len(threads) == 1
    assert threads[0] != threading.get_ident()
    assert await status_of(store, ok) is Status.COMPLETED
    assert (await store.get(bad.id)).last_error == "ValueError: sync failure"


async def test_running_handler_heartbeats_so_its_job_is_not_stale(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    deps = make_deps(settings=make_settings(tmp_path, heartbeat_interval=10.0))
    job = make_job(job_type="slow", payload={"sleepMs": 35_000})
    await queue(deps, store, job)
    with trio.fail_after(LOOP_BOUND):
        async with executor_running(Executor(deps), job) as results:
            pass

    assert results == ["completed"]
    done = await store.get(job.id)
    assert done.status is Status.COMPLETED
    assert done.claimed_at is not None
    assert done.heartbeat_at is not None
    assert done.heartbeat_at > done.claimed_at


async def test_heartbeat_that_finds_the_token_gone_cancels_the_handler(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    hang, started, ended = hanging_handler()
    deps = make_deps(
        registry=registry_with(hang=hang),
        settings=make_settings(tmp_path, heartbeat_interval=1.0),
    )
    job = make_job(job_type="hang")
    await queue(deps, store, job)
    with trio.fail_after(LOOP_BOUND):
        async with executor_running(Executor(deps), job) as results:
            await started.wait()
            # The reaper takes the job back, as if the heartbeats had stopped arriving.
            recovered = await recover_running(deps, store, job)

    assert results == ["stale"]
    assert ended == [job.id]
    after_reaper = await store.get(job.id)
    assert after_reaper == recovered  # the cancelled attempt wrote nothing afterwards
    assert after_reaper.status is Status.PENDING
    assert after_reaper.attempts == 1
    assert processed(deps, "hang", "stale") == 1


async def test_cancelled_executor_releases_its_running_job_without_counting_an_attempt(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    hang, started, ended = hanging_handler()
    deps = make_deps(registry=registry_with(hang=hang))
    job = make_job(job_type="hang", attempts=1)
    await queue(deps, store, job)

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Executor(deps).run, wake_up(job))
            await started.wait()
            nursery.cancel_scope.cancel()

    assert ended == [job.id]
    released = await store.get(job.id)
    assert released.status is Status.PENDING
    assert released.attempts == 1
    assert released.claim_token is None
    assert released.scheduled_at == released.updated_at  # due again at once
    [record] = await store.attempts(job.id)
    assert (record.number, record.outcome) == (2, Outcome.RELEASED)  # its number, uncounted
    assert processed(deps, "hang", "released") == 1


async def test_roles_together_run_a_failing_job_to_the_dead_letter_queue(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    async def always_fails(ctx: JobContext) -> None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError(f"attempt {ctx.attempt} failed")

    bus = ObservedBus()
    deps = make_deps(bus=bus, registry=registry_with(always_fails=always_fails))
    job = make_job(job_type="always-fails", max_attempts=3)
    await store.insert(job)

    # The bound leaves out the roles' exit: run_executor then shuts its worker-process pool
    # down in a real thread, and no deadline may be pending for virtual time to leap to.
    async with trio.open_nursery() as nursery:
        with trio.fail_after(LOOP_BOUND):
            await nursery.start(run_executor, deps, ["always-fails"])
            nursery.start_soon(Scheduler(deps).dispatch_loop, TERM)
            await bus.wait_for(lambda: len(bus.dead_letters) == 1)
        nursery.cancel_scope.cancel()

    dead = await store.get(job.id)
    assert dead.status is Status.DLQ
    assert dead.attempts == 3
    assert dead.last_error == "RuntimeError: attempt 3 failed"
    # Two backoffs (2 s, then 4 s) lie between the first and the last attempt.
    assert dead.updated_at >= BASE + timedelta(seconds=6)
    assert bus.published_ids() == [job.id] * 3
    records = await store.attempts(job.id)
    assert [(r.number, r.outcome, r.error_type) for r in records] == [
        (n, Outcome.FAILED, "RuntimeError") for n in (1, 2, 3)
    ]
    assert [r.error_message for r in records] == [f"attempt {n} failed" for n in (1, 2, 3)]
    for record in records:
        assert record.traceback is not None
        assert "in always_fails" in record.traceback
    assert processed(deps, "always-fails", "retried") == 2
    assert processed(deps, "always-fails", "dlq") == 1
