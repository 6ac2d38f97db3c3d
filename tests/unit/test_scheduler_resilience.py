"""No template can stop or spin the dispatch loop, and the loop survives any error: a
template the scheduler fails on is dead-lettered with the reason, one that never moves is
fired once a pass and dead-lettered as stuck, and an unexpected error in a pass is counted,
backed off and survived (it killed every leader in turn before)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import trio
import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.cron import Occurrence
from jobscheduler.domain.model import Job, Status
from jobscheduler.roles.scheduler.loop import ERROR_BACKOFF, Scheduler
from jobscheduler.roles.scheduler.templates import STUCK_LIMIT
from jobscheduler.store import JobStore
from jobscheduler.store.query import Pick

from .conftest import DepsFactory, ProxyStore, make_job, sample
from .roles_support import TERM, ObservedBus, dispatching, status_of

EVERY_MINUTE = "* * * * *"


def template(**fields: object) -> Job:
    return make_job(cron=EVERY_MINUTE, **fields)  # type: ignore[arg-type]


class PoisonFor(ProxyStore):
    """Recording the ledger of one template raises an error nobody foresaw."""

    def __init__(self, inner: JobStore, poison_id: str) -> None:
        super().__init__(inner)
        self.poison_id = poison_id

    async def record_occurrences(
        self, records: Sequence[Occurrence]
    ) -> list[tuple[Occurrence, bool]]:
        if any(r.template_id == self.poison_id for r in records):
            raise KeyError("timezone")
        return await self.inner.record_occurrences(records)


async def test_a_template_the_scheduler_fails_on_is_dead_lettered_and_the_others_fire(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    poison = await store.insert(template())
    healthy = await store.insert(template())
    deps = make_deps(store=PoisonFor(store, poison.id))

    await Scheduler(deps).tick()

    dead = await store.get(poison.id)
    assert dead.status is Status.DLQ
    assert dead.last_error is not None
    assert "the scheduler failed on this template" in dead.last_error
    assert "KeyError" in dead.last_error
    moved = await store.get(healthy.id)
    assert moved.status is Status.PENDING
    assert moved.scheduled_at > healthy.scheduled_at
    labels = {"reason": "error"}
    assert sample(deps.metrics, "scheduler_templates_dead_lettered_total", labels) == 1


class NeverMoves(ProxyStore):
    """A template whose moves always lose, as if something changed it every time; counts
    the scheduler's passes and stops the test if they run away."""

    def __init__(self, inner: JobStore, runaway: trio.CancelScope) -> None:
        super().__init__(inner)
        self.runaway = runaway
        self.passes = 0

    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        self.passes += 1
        if self.passes > 1000:
            self.runaway.cancel()  # spinning: the assertions below say so
        return await self.inner.due_templates(now, limit)

    async def apply(self, change: states.Change) -> Job | None:
        if change.transition == "advance_template":
            await trio.lowlevel.checkpoint()
            return None
        return await self.inner.apply(change)


async def test_a_template_that_never_moves_is_not_spun_on_and_ends_dead_lettered_as_stuck(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    stuck = await store.insert(template())
    with trio.CancelScope() as runaway:
        never = NeverMoves(store, runaway)
        deps = make_deps(store=never)
        with trio.move_on_after(60):
            await Scheduler(deps).dispatch_loop(TERM)

    assert not runaway.cancelled_caught, f"{never.passes} passes in a minute"
    assert never.passes < 200
    dead = await store.get(stuck.id)
    assert dead.status is Status.DLQ
    assert dead.last_error is not None
    assert f"in {STUCK_LIMIT} passes" in dead.last_error
    labels = {"reason": "stuck"}
    assert sample(deps.metrics, "scheduler_templates_dead_lettered_total", labels) == 1


class FailsOnce(ProxyStore):
    """The first claim raises an error nobody foresaw; later ones work."""

    def __init__(self, inner: JobStore) -> None:
        super().__init__(inner)
        self.failed = False

    async def claim_due(self, now: datetime, limit: int) -> list[Job]:
        if not self.failed:
            self.failed = True
            raise RuntimeError("a bug")
        return await self.inner.claim_due(now, limit)

    async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
        if not self.failed:
            self.failed = True
            raise RuntimeError("a bug")
        return await self.inner.claim_picks(now, picks)


async def test_the_dispatch_loop_survives_an_unexpected_error_and_dispatches_after_a_pause(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    bus = ObservedBus()
    deps = make_deps(store=FailsOnce(store), bus=bus)
    job = await store.insert(make_job())
    started = trio.current_time()

    async with dispatching(deps):
        await bus.wait_for(lambda: bool(bus.published))

    assert bus.published_ids() == [job.id]
    assert trio.current_time() - started >= ERROR_BACKOFF
    assert await status_of(store, job) is Status.QUEUED
    labels = {"kind": "unexpected"}
    assert sample(deps.metrics, "scheduler_pass_errors_total", labels) == 1
