"""The executor settling wake-ups against the store: unknown and duplicate wake-ups acked and
counted stale, waiting wake-ups picked and settled in shared round trips, and an outcome
write that fails once retried, then written and acked (see ``roles_support`` for the
clocks)."""

from __future__ import annotations

from collections.abc import Sequence

import trio
import trio.testing

from jobscheduler.bus import WakeUp
from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.errors import StoreError
from jobscheduler.roles.deps import Deps
from jobscheduler.store.base import JobStore

from .conftest import DepsFactory, ProxyStore, make_job, sample
from .roles_support import (
    ObservedBus,
    consuming,
    processed,
    queue,
    status_of,
    wake_up,
)


async def test_unknown_and_duplicate_wake_ups_are_acked_and_counted_stale(
    autojump_clock: trio.testing.MockClock, observed: tuple[Deps, ObservedBus], store: JobStore
) -> None:
    deps, bus = observed
    job = make_job()
    await queue(deps, store, job)
    unknown = WakeUp(job_id="0123456789abcdef01234567", job_type="noop", priority=0)

    async with consuming(deps):
        await bus.publish([wake_up(job), wake_up(job), unknown])
        await bus.wait_for(lambda: len(bus.acked) == 3)

    assert sorted(m.job_id for m in bus.acked) == sorted([job.id, job.id, unknown.job_id])
    assert await status_of(store, job) is Status.COMPLETED
    assert processed(deps, "noop", "completed") == 1
    assert processed(deps, "noop", "stale") == 2
    assert sample(deps.metrics, "jobs_transitions_lost_total", {"transition": "pick"}) == 2


class RecordingStore(ProxyStore):
    """Records the transitions of every apply_many round trip, and can fail the next one
    that carries a given transition."""

    def __init__(self, inner: JobStore) -> None:
        super().__init__(inner)
        self.round_trips: list[list[str]] = []
        self.fail_on: str | None = None
        self.failed = trio.Event()

    async def apply_many(self, changes: Sequence[states.Change]) -> list[Job | None]:
        transitions = [change.transition for change in changes]
        self.round_trips.append(transitions)
        if self.fail_on in transitions:
            self.fail_on = None
            self.failed.set()
            await trio.lowlevel.checkpoint()
            raise StoreError("disk I/O error")
        return await self.inner.apply_many(changes)


async def test_waiting_wake_ups_are_picked_and_settled_in_shared_round_trips(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    bus = ObservedBus()
    recording = RecordingStore(store)
    deps = make_deps(store=recording, bus=bus)  # executor_concurrency 8
    jobs = [make_job() for _ in range(12)]
    await queue(deps, store, *jobs)
    await bus.publish([wake_up(job) for job in jobs])

    async with consuming(deps):
        await bus.wait_for(lambda: len(bus.acked) == len(jobs))

    for job in jobs:
        assert await status_of(store, job) is Status.COMPLETED
    picks = [trip for trip in recording.round_trips if "pick" in trip]
    # The first message brings the 7 waiting behind it (8 handlers at most); the rest follow.
    assert [trip.count("pick") for trip in picks] == [8, 4]
    assert all(trip == ["pick", "start"] * (len(trip) // 2) for trip in picks)
    completes = [trip for trip in recording.round_trips if "complete" in trip]
    assert sum(len(trip) for trip in completes) == len(jobs)
    assert len(completes) < len(jobs)
    assert processed(deps, "noop", "completed") == len(jobs)


async def test_an_outcome_write_that_fails_once_is_retried_then_written_and_acked(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    bus = ObservedBus()
    recording = RecordingStore(store)
    recording.fail_on = "complete"
    deps = make_deps(store=recording, bus=bus)
    job = make_job()
    await queue(deps, store, job)

    async with consuming(deps):
        await bus.publish([wake_up(job)])
        await bus.wait_for(lambda: len(bus.acked) == 1)

    assert recording.failed.is_set()
    assert [trip for trip in recording.round_trips if "complete" in trip] == [["complete"]] * 2
    assert bus.acked == [wake_up(job)]
    assert bus.released == []
    assert await status_of(store, job) is Status.COMPLETED
    assert processed(deps, "noop", "completed") == 1
