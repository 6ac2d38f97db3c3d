"""What the in-memory store promises beyond the contract suite it runs with the other
adapters (``tests/contract``): each call is one checkpoint then an atomic step, a call
cancelled at its checkpoint did nothing, the data outlives close/start, and an update that
would break a unique index is refused whole."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.errors import StoreError
from jobscheduler.store.memory import MemoryJobStore

from .conftest import BASE, make_job


async def started() -> MemoryJobStore:
    store = MemoryJobStore()
    await store.start()
    return store


async def test_every_call_is_a_schedule_point_so_concurrent_callers_interleave() -> None:
    store = await started()
    order: list[str] = []

    async def caller(name: str) -> None:
        for _ in range(2):
            await store.count_by_status()
            order.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller, "a")
        nursery.start_soon(caller, "b")
    assert sorted(order) == ["a", "a", "b", "b"]
    assert order not in (["a", "a", "b", "b"], ["b", "b", "a", "a"])


async def test_a_call_cancelled_at_its_checkpoint_changes_nothing() -> None:
    store = await started()
    job = make_job()
    with trio.CancelScope() as scope:
        scope.cancel()
        await store.insert(job)
    assert scope.cancelled_caught
    assert await store.count_by_status() == dict.fromkeys(Status, 0)


async def test_a_call_before_start_or_after_close_is_a_store_error() -> None:
    store = MemoryJobStore()
    with pytest.raises(StoreError, match="not started"):
        await store.get(make_job().id)
    await store.start()
    await store.close()
    await store.close()  # twice is fine
    with pytest.raises(StoreError, match="closed"):
        await store.ping()


async def test_the_data_outlives_a_close_and_a_new_start() -> None:
    store = await started()
    job = await store.insert(make_job())
    await store.close()
    await store.start()
    assert await store.get(job.id) == job


async def test_an_update_that_would_take_another_jobs_key_is_refused_whole() -> None:
    store = await started()
    holder = await store.insert(make_job(key="taken"))
    other = await store.insert(make_job(key="free"))
    steal = states.Change(
        transition="test_rename",
        job_id=other.id,
        expect={"status": Status.PENDING},
        set={"idempotency_key": "taken", "priority": 9},
    )
    with pytest.raises(StoreError, match="unique index key"):
        await store.apply(steal)
    assert await store.get(other.id) == other
    assert await store.get(holder.id) == holder
    # The key it left is free again once a change moves it.
    move = states.Change(
        transition="test_rename", job_id=other.id, expect={}, set={"idempotency_key": "moved"}
    )
    assert await store.apply(move) is not None
    assert (await store.insert(make_job(key="free"))).idempotency_key == "free"


async def test_times_are_kept_in_whole_milliseconds_like_the_other_adapters() -> None:
    store = await started()
    precise = BASE.replace(microsecond=123_456)
    job = await store.insert(make_job(scheduled_at=BASE, created_at=BASE))
    moved = states.Change(
        transition="test_move", job_id=job.id, expect={}, set={"scheduled_at": precise}
    )
    updated = await store.apply(moved)
    assert updated is not None
    assert updated.scheduled_at == BASE.replace(microsecond=123_000)
    # An expectation written with the precise time matches the kept one.
    again = states.Change(
        transition="test_move",
        job_id=job.id,
        expect={"scheduled_at": precise},
        set={"priority": 1},
    )
    assert await store.apply(again) is not None
