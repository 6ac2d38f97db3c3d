"""The scheduler's claim is shielded (so a claim and the publish of its wake-ups are one unit)
but bounded: a store that never answers a claim - a stalled disk under SQLite - must not hold
a deposed leader or a shutdown for ever."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import pytest
import trio
import trio.testing

from jobscheduler.domain.model import Job
from jobscheduler.errors import StoreError
from jobscheduler.roles.scheduler.loop import CLAIM_CALL_TIMEOUT, Scheduler
from jobscheduler.store import JobStore
from jobscheduler.store.query import Pick

from .conftest import DepsFactory, ProxyStore, make_job, started_sqlite
from .roles_support import ObservedBus


class NeverAnswers(ProxyStore):
    """A store whose claims never come back."""

    def __init__(self, inner: JobStore) -> None:
        super().__init__(inner)
        self.claiming = trio.Event()

    async def claim_due(self, now: datetime, limit: int) -> list[Job]:
        self.claiming.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
        return await self.claim_due(now, len(picks))


async def test_a_claim_that_never_answers_fails_at_its_deadline(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    bus = ObservedBus()
    deps = make_deps(store=NeverAnswers(store), bus=bus)
    await store.insert(make_job())
    started = trio.current_time()

    with pytest.raises(StoreError, match=f"did not answer within {CLAIM_CALL_TIMEOUT:g}s"):
        await Scheduler(deps).tick()

    assert trio.current_time() - started == pytest.approx(CLAIM_CALL_TIMEOUT)
    assert bus.published == []


async def test_a_scheduler_cancelled_during_a_hung_claim_stops_at_the_claims_deadline(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    hung = NeverAnswers(store)
    deps = make_deps(store=hung, bus=ObservedBus())
    await store.insert(make_job())

    failed: list[StoreError] = []

    async def tick() -> None:
        try:
            await Scheduler(deps).tick()
        except StoreError as exc:  # what the dispatch loop catches before it stops
            failed.append(exc)

    with trio.CancelScope() as term:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick)
            await hung.claiming.wait()  # the claim is under way, shielded
            claimed_at = trio.current_time()
            term.cancel()  # shutdown, or the elector deposing this leader

    assert len(failed) == 1
    assert trio.current_time() - claimed_at == pytest.approx(CLAIM_CALL_TIMEOUT)


class Stall:
    """A write that holds the SQLite writer thread (a stalled disk) until released."""

    def __init__(self) -> None:
        self.running = threading.Event()
        self.release = threading.Event()

    def __call__(self, conn: object) -> None:
        self.running.set()
        self.release.wait(10)


async def test_a_sqlite_claim_taken_by_a_stalled_writer_stops_waiting_when_cancelled(
    tmp_path: Path,
) -> None:
    store = await started_sqlite(tmp_path / "jobs.db")
    stall = Stall()
    gave_up = trio.Event()

    async def claim() -> None:
        with trio.move_on_after(0.5):
            await store.claim_due(datetime.now().astimezone(), 10)
        gave_up.set()

    async with trio.open_nursery() as nursery:
        # Queued in the same checkpoint, so the thread takes both in one batch: the claim
        # is with the thread, behind the stall, when its deadline comes.
        nursery.start_soon(store._write, stall)
        nursery.start_soon(claim)
        await trio.to_thread.run_sync(stall.running.wait, 10)
        with trio.fail_after(5):
            await gave_up.wait()
        stall.release.set()
    await store.close()
