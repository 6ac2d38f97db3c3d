"""The executor on the real Kafka broker: while its store fails, and with more running
slots than the bus's default in-flight cap (in one process).

Regression: with wake-ups waiting in Kafka and the store down, every failed pick left its
message un-acked; the subscription counted them in flight forever, so commits froze and
flow control paused every partition -- after the store came back the executor completed
nothing until restarted. Here the store refuses picks until a backlog of wake-ups has been
released, then recovers, and new jobs must complete within seconds on the same executor.

The store is SQLite behind a proxy that fails on purpose (the fault-injection suite does the
same with real processes and the MongoDB-protocol server); the bus is the real KafkaBus on
the broker at KAFKA_BROKERS, with this test's own topic prefix.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
import trio

from jobscheduler.bus import WakeUp
from jobscheduler.bus.kafka import KafkaBus, delete_prefixed_topics
from jobscheduler.clock import SystemClock
from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.election.local import LocalElector
from jobscheduler.errors import BusError, StoreError
from jobscheduler.handlers import JobContext, default_registry
from jobscheduler.observability.metrics import Metrics
from jobscheduler.process.assembly import production_bus
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.store.base import JobStore
from jobscheduler.store.sqlite import SQLiteJobStore
from tests.unit.conftest import ProxyStore, make_job, make_settings

from .conftest import kafka_brokers

pytestmark = pytest.mark.integration

#: Smaller than the backlog, so the old behaviour would pause every partition for good.
MAX_IN_FLIGHT = 8


class PicksRefused(ProxyStore):
    """Refuses every round trip that picks, until ``refusing`` is cleared."""

    def __init__(self, inner: JobStore) -> None:
        super().__init__(inner)
        self.refusing = True
        self.refused = 0

    async def apply_many(self, changes: Sequence[states.Change]) -> list[Job | None]:
        if self.refusing and any(c.transition == "pick" for c in changes):
            self.refused += sum(c.transition == "pick" for c in changes)
            await trio.lowlevel.checkpoint()
            raise StoreError("connection refused")
        return await self.inner.apply_many(changes)


@pytest.fixture
async def kafka_bus() -> AsyncIterator[KafkaBus]:
    prefix = f"itest-exec-{uuid.uuid4().hex[:8]}."
    bus = KafkaBus(
        kafka_brokers(),
        partitions=3,
        poll_timeout=0.1,
        max_in_flight_per_subscription=MAX_IN_FLIGHT,
        topic_prefix=prefix,
    )
    await bus.start()
    try:
        yield bus
    finally:
        await bus.close()
        with contextlib.suppress(BusError):
            await trio.to_thread.run_sync(delete_prefixed_topics, kafka_brokers(), prefix)


async def wait_until_done(store: JobStore, jobs: Sequence[Job]) -> None:
    while True:
        statuses = [(await store.get(job.id)).status for job in jobs]
        if all(status is Status.COMPLETED for status in statuses):
            return
        await trio.sleep(0.1)


async def test_executor_completes_new_jobs_after_the_store_refused_a_backlog_of_picks(
    tmp_path: Path, kafka_bus: KafkaBus
) -> None:
    sqlite = SQLiteJobStore(tmp_path / "jobs.db")
    await sqlite.start()
    store = PicksRefused(sqlite)
    clock = SystemClock()
    deps = Deps(
        settings=make_settings(tmp_path, executor_concurrency=4),
        store=store,
        bus=kafka_bus,
        elector=LocalElector("leader-test"),
        registry=default_registry(),
        metrics=Metrics(),
        clock=clock,
        waker=None,
    )

    async def queue(count: int) -> list[Job]:
        jobs = [make_job(scheduled_at=clock.now()) for _ in range(count)]
        for job in jobs:
            await sqlite.insert(job)
        assert len(await sqlite.claim_due(clock.now(), count)) == count
        await kafka_bus.publish(
            [WakeUp(job_id=j.id, job_type=j.job_type, priority=j.priority) for j in jobs]
        )
        return jobs

    try:
        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:
                await nursery.start(Executor(deps).consume, "noop")
                backlog = await queue(40)
                # Far more picks refused than the in-flight room: only possible if each
                # refused message was settled (released) and the bus moved on.
                with trio.fail_after(30):
                    while store.refused < 3 * MAX_IN_FLIGHT:
                        await trio.sleep(0.05)
                store.refusing = False  # the store is back
                recovered_at = time.monotonic()
                fresh = await queue(10)
                with trio.fail_after(20):
                    await wait_until_done(sqlite, fresh)
                recovery = time.monotonic() - recovered_at
                nursery.cancel_scope.cancel()

        statuses = [(await sqlite.get(job.id)).status for job in backlog]
        # Released picks left their jobs queued, for the reaper; the rest ran.
        assert set(statuses) <= {Status.QUEUED, Status.COMPLETED}
        assert statuses.count(Status.QUEUED) >= 3 * MAX_IN_FLIGHT
        print(f"new jobs completed {recovery:.2f}s after the store came back")
    finally:
        await sqlite.close()


#: More running slots than the 64 un-acked deliveries the bus allows unless told otherwise.
MANY_SLOTS = 80


async def test_the_assembled_bus_delivers_enough_to_fill_every_running_slot(
    tmp_path: Path,
) -> None:
    """EXECUTOR_CONCURRENCY above the bus's default in-flight cap: every slot runs a job
    (the bus of a role process delivers as many un-acked as the executor holds)."""
    prefix = f"itest-slots-{uuid.uuid4().hex[:8]}."
    settings = make_settings(
        tmp_path,
        executor_concurrency=MANY_SLOTS,
        kafka_brokers=kafka_brokers(),
        kafka_topic_prefix=prefix,
    )
    bus = production_bus(settings)
    store = SQLiteJobStore(tmp_path / "jobs.db")
    running = 0
    peak = 0
    release = trio.Event()

    async def hold(ctx: JobContext) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        try:
            await release.wait()
        finally:
            running -= 1

    registry = default_registry()
    registry.register("hold", hold)
    clock = SystemClock()
    deps = Deps(
        settings=settings,
        store=store,
        bus=bus,
        elector=LocalElector("leader-test"),
        registry=registry,
        metrics=Metrics(),
        clock=clock,
        waker=None,
    )
    await store.start()
    await bus.start()
    try:
        jobs = [make_job(job_type="hold", scheduled_at=clock.now()) for _ in range(MANY_SLOTS + 20)]
        for job in jobs:
            await store.insert(job)
        assert len(await store.claim_due(clock.now(), len(jobs))) == len(jobs)
        with trio.fail_after(90):
            async with trio.open_nursery() as nursery:
                await nursery.start(Executor(deps).consume, "hold")
                await bus.publish(
                    [WakeUp(job_id=j.id, job_type=j.job_type, priority=j.priority) for j in jobs]
                )
                with trio.fail_after(30):
                    while running < MANY_SLOTS:
                        await trio.sleep(0.05)
                await trio.sleep(0.5)  # no more than the slots start meanwhile
                assert peak == MANY_SLOTS
                release.set()
                await wait_until_done(store, jobs)
                nursery.cancel_scope.cancel()
    finally:
        await bus.close()
        await store.close()
        with contextlib.suppress(BusError):
            await trio.to_thread.run_sync(delete_prefixed_topics, kafka_brokers(), prefix)
