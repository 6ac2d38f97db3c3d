"""What the tests of the roles (``test_roles_*``) share: test doubles of the bus, the
elector and the store, and helpers that put jobs where a role finds them.

The roles run on the in-memory store in virtual time (``autojump_clock``; see
``conftest``). Single role steps (one tick, one sweep) check exact times; role loops and the
executor wait for events (a publish, an ack, a dead letter) rather than for times, bounded
by :data:`LOOP_BOUND` of virtual time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import attrs
import trio
import trio.testing

from jobscheduler.bus import Delivery, Subscription, WakeUp
from jobscheduler.bus.base import DeadLetter
from jobscheduler.bus.local import LocalBus
from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.election import Elector, Term
from jobscheduler.errors import BusError, PermanentError
from jobscheduler.handlers import HandlerRegistry, JobContext, default_registry
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore

from .conftest import ProxyStore, sample

TERM = Term(leader_id="leader-test", token=1)

#: Virtual-time bound on waiting for a role loop to do something.
LOOP_BOUND = 600.0

#: Bound on anything a test waits for in real time (worker processes start slowly on a
#: busy machine); never an assertion about speed.
REAL_BOUND = 60.0


# ----------------------------------------------------------------------- test doubles


class _ObservedDelivery(Delivery):
    def __init__(self, inner: Delivery, bus: ObservedBus) -> None:
        self.message = inner.message
        self._inner = inner
        self._bus = bus

    async def ack(self) -> None:
        await self._inner.ack()
        self._bus.acked.append(self.message)
        self._bus.pulse()

    async def release(self) -> None:
        await self._inner.release()
        self._bus.released.append(self.message)
        self._bus.pulse()


class _ObservedSubscription(Subscription):
    def __init__(self, inner: Subscription, bus: ObservedBus) -> None:
        self._inner = inner
        self._it = aiter(inner)
        self._bus = bus

    def __aiter__(self) -> _ObservedSubscription:
        return self

    async def __anext__(self) -> Delivery:
        return _ObservedDelivery(await anext(self._it), self._bus)

    def receive_ready(self, limit: int) -> list[Delivery]:
        return [_ObservedDelivery(d, self._bus) for d in self._inner.receive_ready(limit)]


class ObservedBus(LocalBus):
    """The local bus, recording what was published, acked and released, and able to fail
    publishes.

    Tests wait on it with :meth:`wait_for` instead of polling.
    """

    def __init__(self) -> None:
        super().__init__()
        self.published: list[WakeUp] = []
        self.acked: list[WakeUp] = []
        self.released: list[WakeUp] = []
        self.fail_publish = False
        self._changed = trio.Event()

    def pulse(self) -> None:
        changed, self._changed = self._changed, trio.Event()
        changed.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()

    def published_ids(self) -> list[str]:
        return [m.job_id for m in self.published]

    async def publish(self, messages: Sequence[WakeUp]) -> None:
        if self.fail_publish:
            await trio.lowlevel.checkpoint()
            raise BusError("broker unreachable")
        await super().publish(messages)
        self.published.extend(messages)
        self.pulse()

    async def publish_dead_letter(self, letter: DeadLetter) -> None:
        await super().publish_dead_letter(letter)
        self.pulse()

    @asynccontextmanager
    async def subscribe(self, job_type: str) -> AsyncIterator[Subscription]:
        async with super().subscribe(job_type) as subscription:
            yield _ObservedSubscription(subscription, self)


class ControlledElector(Elector):
    """An elector the test grants and revokes leadership on."""

    def __init__(self) -> None:
        self._grant = trio.Event()
        self._revoke = trio.Event()
        self._resigned_event = trio.Event()
        self.terms = 0
        self.resigned: list[int] = []

    def grant(self) -> None:
        self._grant.set()

    def revoke(self) -> None:
        self._revoke.set()

    async def wait_resigned(self, count: int) -> None:
        while len(self.resigned) < count:
            await self._resigned_event.wait()

    async def start(self) -> None:
        await trio.lowlevel.checkpoint()

    async def close(self) -> None:
        await trio.lowlevel.checkpoint()

    async def campaign(self) -> Term:
        await self._grant.wait()
        self._grant = trio.Event()
        self.terms += 1
        return Term(leader_id="controlled", token=self.terms)

    async def watch(self, term: Term) -> None:
        await self._revoke.wait()
        self._revoke = trio.Event()

    async def resign(self, term: Term) -> None:
        await trio.lowlevel.checkpoint()
        self.resigned.append(term.token)
        resigned, self._resigned_event = self._resigned_event, trio.Event()
        resigned.set()


class Barrier:
    """Holds every caller until ``parties`` have arrived (then lets everyone through)."""

    def __init__(self, parties: int) -> None:
        self._parties = parties
        self._arrived = 0
        self._all_here = trio.Event()

    async def wait(self) -> None:
        self._arrived += 1
        if self._arrived >= self._parties:
            self._all_here.set()
        await self._all_here.wait()


class SplitBrainStore(ProxyStore):
    """Both schedulers read the due templates, and only then may either act on them."""

    def __init__(self, inner: JobStore, barrier: Barrier) -> None:
        super().__init__(inner)
        self._barrier = barrier

    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        templates = await self.inner.due_templates(now, limit)
        await self._barrier.wait()
        return templates


# ----------------------------------------------------------------------- helpers


def registry_with(**handlers: Callable[[JobContext], Awaitable[None] | None]) -> HandlerRegistry:
    """The built-ins plus ``handlers`` (underscores in names become dashes)."""
    registry = default_registry()
    for name, func in handlers.items():
        registry.register(name.replace("_", "-"), func)
    return registry


def raising(kind: type[Exception], *args: object) -> Callable[[JobContext], Awaitable[None]]:
    """A handler whose every attempt fails with a new ``kind(*args)`` (after a checkpoint)."""

    async def handler(ctx: JobContext) -> None:
        await trio.lowlevel.checkpoint()
        raise kind(*args)

    return handler


def wake_up(job: Job) -> WakeUp:
    return WakeUp(job_id=job.id, job_type=job.job_type, priority=job.priority)


async def status_of(store: JobStore, job: Job) -> Status:
    return (await store.get(job.id)).status


async def reached(store: JobStore, job_id: str, status: Status, *, poll: float = 1.0) -> None:
    """Once the job is in ``status``, polled every ``poll`` seconds (nothing else wakes the
    test) within :data:`LOOP_BOUND`."""
    with trio.fail_after(LOOP_BOUND):
        while True:
            if (await store.get(job_id)).status is status:
                return
            await trio.sleep(poll)


async def queue(deps: Deps, store: JobStore, *jobs: Job) -> None:
    """Insert ``jobs`` (due now) and claim them: queued, as after a tick."""
    for job in jobs:
        await store.insert(job)
    claimed = await store.claim_due(deps.clock.now(), len(jobs) + 10)
    assert {j.id for j in claimed} == {j.id for j in jobs}


async def pick_and_start(
    deps: Deps, store: JobStore, job: Job, token: str, *, start: bool = True
) -> Job:
    """What an executor (``worker-old``) does when it takes a queued job."""
    now = deps.clock.now()
    changes = [states.pick(job.id, worker="worker-old", token=token, now=now)]
    if start:
        changes.append(states.start(job.id, token=token, now=now))
    results = await store.apply_many(changes)
    last = results[-1]
    assert last is not None
    assert all(r is not None for r in results)
    return last


async def abandon_running(deps: Deps, store: JobStore, *jobs: Job) -> None:
    """Start each of the queued ``jobs`` in an executor that then stops heartbeating, and
    wait until their claims have expired: jobs the reaper recovers as lost."""
    for i, job in enumerate(jobs):
        await pick_and_start(deps, store, job, f"tok-{i}")
    await trio.sleep(deps.settings.claim_timeout + 1)


def hanging_handler() -> tuple[Callable[[JobContext], Awaitable[None]], trio.Event, list[str]]:
    """A handler that runs until cancelled; returns it, its started event, and the ids of
    the jobs whose handler ended."""
    started = trio.Event()
    ended: list[str] = []

    async def hang(ctx: JobContext) -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            ended.append(ctx.job_id)

    return hang, started, ended


@attrs.define
class StepRecorder:
    """A workflow step's handler (``run``): appends the name of each step it runs to ``ran``,
    in order, and fails permanently at a step named in ``failing``, with the message mapped
    to it."""

    failing: dict[str, str] = attrs.field(factory=dict)
    ran: list[str] = attrs.field(factory=list)

    async def run(self, ctx: JobContext) -> None:
        assert ctx.step is not None
        self.ran.append(ctx.step)
        if ctx.step in self.failing:
            raise PermanentError(self.failing[ctx.step])


@asynccontextmanager
async def executor_running(executor: Executor, job: Job) -> AsyncIterator[list[str]]:
    """Run ``executor`` on ``job`` alongside its heartbeat loop while the block runs; yields
    the list its result is appended to, and on leaving waits for that result."""
    results: list[str] = []
    finished = trio.Event()

    async def run() -> None:
        results.append(await executor.run(wake_up(job)))
        finished.set()

    async with trio.open_nursery() as nursery:
        await nursery.start(executor.heartbeat_loop)
        nursery.start_soon(run)
        yield results
        await finished.wait()
        nursery.cancel_scope.cancel()


async def run_on_worker_processes(deps: Deps, job: Job) -> str:
    """Run ``job`` once on an executor whose ``def`` handlers run in real worker processes,
    which reach it through its socket (bounded by :data:`REAL_BOUND`); its result."""
    import trio_parallel

    from jobscheduler.handlers.runners import HandlerRunner

    with trio.fail_after(REAL_BOUND):
        async with (
            trio_parallel.open_worker_context() as workers,
            trio.open_nursery() as nursery,
        ):
            executor = Executor(deps, HandlerRunner(now=deps.clock.now, workers=workers))
            await nursery.start(executor.children.serve)
            result = await executor.run(wake_up(job))
            nursery.cancel_scope.cancel()
    return result


async def recover_running(deps: Deps, store: JobStore, job: Job) -> Job:
    """What the reaper does when a running job's heartbeats stop arriving: takes it back
    (retrying while a heartbeat moves it between the read and the write)."""
    recovered: Job | None = None
    while recovered is None:  # conditional on the heartbeat it saw
        running = await store.get(job.id)
        assert running.status is Status.RUNNING
        recovered = await store.apply(states.recover(running, now=deps.clock.now()))
    return recovered


@asynccontextmanager
async def consuming(deps: Deps, job_type: str = "noop") -> AsyncIterator[None]:
    """An executor consuming ``job_type`` while the block runs (bounded by
    :data:`LOOP_BOUND`)."""
    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(Executor(deps).consume, job_type)
            yield
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def dispatching(deps: Deps) -> AsyncIterator[None]:
    """A scheduler's dispatch loop running (as the leader of :data:`TERM`) while the block
    runs (bounded by :data:`LOOP_BOUND`)."""
    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(Scheduler(deps).dispatch_loop, TERM)
            yield
            nursery.cancel_scope.cancel()


def processed(deps: Deps, job_type: str, result: str) -> float:
    """How many ``job_type`` jobs the executor counted as processed with ``result``
    (``executor_jobs_processed_total``)."""
    labels = {"job_type": job_type, "result": result}
    return sample(deps.metrics, "executor_jobs_processed_total", labels)


def registry_of(name: str, func: Any, **options: Any) -> HandlerRegistry:
    registry = default_registry()
    registry.register(name, func, **options)
    return registry


async def run_queued(deps: Deps, store: JobStore, job: Job) -> str:
    """Queue ``job`` and run it once on an executor; its result."""
    await queue(deps, store, job)
    return await Executor(deps).run(wake_up(job))
