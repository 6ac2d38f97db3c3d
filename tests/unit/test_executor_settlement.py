"""Every delivery is settled, whatever the store does.

Regression: a pick or an outcome write that raised StoreError or timed out left its
message neither acked nor released; on Kafka that froze the partition's commits and, once
enough had piled up, flow control paused every partition for good -- an executor that
completed nothing for minutes after the store came back. Here the store fails or hangs
on purpose, and each test checks that every message ends acked (outcome durable, or job not
ours) or released (outcome unknown), that the executor keeps working afterwards, and that
the job is left where the reaper will find it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

from jobscheduler.bus.base import DeadLetter
from jobscheduler.config import Settings
from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.errors import StoreError
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.executor.consume import (
    OUTCOME_RETRY_FOR,
    OUTCOME_TIMEOUT,
    Executor,
)
from jobscheduler.roles.executor.role import run_executor
from jobscheduler.store.base import JobStore

from .conftest import DepsFactory, ProxyStore, make_job, make_settings
from .roles_support import (
    LOOP_BOUND,
    ObservedBus,
    consuming,
    processed,
    queue,
    raising,
    registry_with,
    status_of,
    wake_up,
)


class BrokenStore(ProxyStore):
    """Fails (``mode="error"``) or hangs (``mode="hang"``) every round trip carrying one of
    ``transitions`` while ``broken``; counts the failed round trips."""

    def __init__(self, inner: JobStore, transitions: set[str], mode: str = "error") -> None:
        super().__init__(inner)
        self.transitions = transitions
        self.mode = mode
        self.broken = True
        self.failures = 0
        self.failed = trio.Event()

    async def apply_many(self, changes: Sequence[states.Change]) -> list[Job | None]:
        if self.broken and self.transitions & {c.transition for c in changes}:
            self.failures += 1
            self.failed.set()
            if self.mode == "hang":
                await trio.sleep_forever()
            await trio.lowlevel.checkpoint()
            raise StoreError("connection refused")
        return await self.inner.apply_many(changes)


def broken_for(
    make_deps: DepsFactory,
    store: JobStore,
    transition: str,
    mode: str = "error",
    *,
    settings: Settings | None = None,
) -> tuple[Deps, ObservedBus, BrokenStore]:
    """Deps (with ``settings``, when given) on an observed bus, over ``store`` broken (in
    ``mode``) for the round trips carrying ``transition``."""
    bus = ObservedBus()
    broken = BrokenStore(store, {transition}, mode)
    return make_deps(store=broken, bus=bus, settings=settings), bus, broken


@pytest.mark.parametrize("mode", ["error", "hang"])
async def test_a_failed_pick_releases_its_messages_and_the_executor_carries_on(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    mode: str,
) -> None:
    deps, bus, broken = broken_for(make_deps, store, "pick", mode)
    stuck = [make_job() for _ in range(3)]
    later = make_job()
    await queue(deps, store, *stuck, later)

    async with consuming(deps):
        await bus.publish([wake_up(job) for job in stuck])
        await bus.wait_for(lambda: len(bus.released) == len(stuck))
        broken.broken = False  # the store is back
        await bus.publish([wake_up(later)])
        await bus.wait_for(lambda: len(bus.acked) == 1)

    assert sorted(m.job_id for m in bus.released) == sorted(j.id for j in stuck)
    assert bus.acked == [wake_up(later)]
    assert await status_of(store, later) is Status.COMPLETED
    for job in stuck:  # still queued: the reaper re-pends them after QUEUED_TIMEOUT
        assert await status_of(store, job) is Status.QUEUED


async def test_an_outcome_the_store_never_takes_is_released_after_the_retries(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
) -> None:
    deps, bus, broken = broken_for(make_deps, store, "complete")
    lost = make_job()
    await queue(deps, store, lost)

    async with consuming(deps):
        started = trio.current_time()
        await bus.publish([wake_up(lost)])
        await bus.wait_for(lambda: bool(bus.released))
        gave_up_after = trio.current_time() - started

    assert bus.released == [wake_up(lost)]
    assert bus.acked == []
    assert broken.failures > 2  # retried, not given up at the first error
    assert OUTCOME_RETRY_FOR * 0.5 <= gave_up_after <= OUTCOME_RETRY_FOR + 1
    # Outcome unknown: left running for the reaper, never reported done.
    assert await status_of(store, lost) is Status.RUNNING
    assert processed(deps, "noop", "completed") == 0


async def test_an_outcome_write_that_hangs_is_retried_and_written_when_the_store_answers(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
) -> None:
    deps, bus, broken = broken_for(make_deps, store, "complete", "hang")
    job = make_job()
    await queue(deps, store, job)

    async with consuming(deps):
        await bus.publish([wake_up(job)])
        await broken.failed.wait()
        await trio.sleep(OUTCOME_TIMEOUT + 1)  # the first attempt has timed out
        broken.broken = False
        await bus.wait_for(lambda: bool(bus.acked))

    assert bus.acked == [wake_up(job)]
    assert bus.released == []
    assert await status_of(store, job) is Status.COMPLETED


async def test_a_slot_held_by_an_unwritable_outcome_is_freed_for_the_next_message(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    """With one handler slot, the next message runs once the first is released."""
    settings = make_settings(tmp_path, executor_concurrency=1)
    deps, bus, broken = broken_for(make_deps, store, "complete", settings=settings)
    first, second = make_job(), make_job()
    await queue(deps, store, first, second)

    async with consuming(deps):
        await bus.publish([wake_up(first), wake_up(second)])
        await bus.wait_for(lambda: len(bus.released) == 1)
        broken.broken = False
        await bus.wait_for(lambda: len(bus.acked) == 1)

    assert bus.released == [wake_up(first)]
    assert bus.acked == [wake_up(second)]
    assert await status_of(store, second) is Status.COMPLETED


class StuckDeadLetterBus(ObservedBus):
    """Publishing a dead letter never finishes (a frozen broker)."""

    def __init__(self) -> None:
        super().__init__()
        self.dead_letter_attempts: list[str] = []

    async def publish_dead_letter(self, letter: DeadLetter) -> None:
        self.dead_letter_attempts.append(letter.job_id)
        self.pulse()
        await trio.sleep_forever()


async def test_a_dead_letter_stuck_on_the_bus_never_holds_up_settlement(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = StuckDeadLetterBus()
    deps = make_deps(bus=bus, registry=registry_with(fails=raising(RuntimeError, "no")))
    dead = make_job(job_type="fails", max_attempts=1)
    later = make_job(job_type="fails", max_attempts=1)
    await queue(deps, store, dead)

    with trio.fail_after(LOOP_BOUND), caplog.at_level(logging.ERROR):
        async with trio.open_nursery() as nursery:
            await nursery.start(Executor(deps).consume, "fails")
            await bus.publish([wake_up(dead)])
            await bus.wait_for(lambda: bus.dead_letter_attempts == [dead.id])
            assert bus.acked == [wake_up(dead)]  # settled before the publish began
            await queue(deps, store, later)
            await bus.publish([wake_up(later)])
            await bus.wait_for(lambda: len(bus.acked) == 2)  # while the first still hangs
            await bus.wait_for(lambda: len(bus.dead_letter_attempts) == 2)
            nursery.cancel_scope.cancel()

    assert await status_of(store, dead) is Status.DLQ
    assert await status_of(store, later) is Status.DLQ
    assert any(r.getMessage() == "dead letter not published" for r in caplog.records)


async def test_liveness_problem_reports_a_subscription_that_is_not_consuming(
    autojump_clock: trio.testing.MockClock, observed: tuple[Deps, ObservedBus]
) -> None:
    deps, _ = observed
    executor = Executor(deps)
    assert executor.liveness_problem() is None

    with trio.fail_after(LOOP_BOUND):
        async with trio.open_nursery() as nursery:
            await nursery.start(executor.consume, "noop")
            assert executor.liveness_problem() is None  # the local bus is always a member
            [subscription] = executor._subscriptions.values()
            reason = "not a member of group executor-noop for 61s"
            subscription.problem = lambda: reason  # type: ignore[method-assign]
            assert executor.liveness_problem() == reason
            nursery.cancel_scope.cancel()
    assert executor.liveness_problem() is None  # no subscription left


async def test_run_executor_reports_its_executor_for_health_checks(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory
) -> None:
    # The bound leaves out the role's exit: run_executor then shuts its worker-process pool
    # down in a real thread, and no deadline may be pending for virtual time to leap to.
    async with trio.open_nursery() as nursery:
        with trio.fail_after(LOOP_BOUND):
            executor = await nursery.start(run_executor, make_deps(), ["noop", "slow"])
        assert isinstance(executor, Executor)
        assert sorted(executor._subscriptions) == ["noop", "slow"]
        assert executor.liveness_problem() is None
        nursery.cancel_scope.cancel()


async def test_picks_go_on_while_outcomes_are_written_up_to_twice_the_concurrency(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    # A handler that has returned frees its running slot at once, so the next jobs are
    # picked while the outcomes are still being written (here: never, the store hangs on
    # them); messages not yet settled stay bounded by twice EXECUTOR_CONCURRENCY.
    settings = make_settings(tmp_path, executor_concurrency=2)
    deps, bus, _ = broken_for(make_deps, store, "complete", "hang", settings=settings)
    jobs = [make_job() for _ in range(5)]
    await queue(deps, store, *jobs)

    async with consuming(deps):
        await bus.publish([wake_up(job) for job in jobs])
        await trio.sleep(OUTCOME_TIMEOUT / 2)  # well before any outcome write gives up
        statuses = [await status_of(store, job) for job in jobs]

    # Four ran (their outcomes unwritten, so still running in the store); the fifth waits.
    assert statuses == [Status.RUNNING] * 4 + [Status.QUEUED]
