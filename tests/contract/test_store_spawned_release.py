"""The JobStore contract, the release of a completed step's spawned children together
(``release_spawned``): only the waiting children of that spawner move, each exactly as
``release_step`` would move it, at most ``limit`` a call, and the counters follow. Run
against every adapter."""

from __future__ import annotations

from datetime import timedelta

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status, new_job_id
from jobscheduler.domain.steps import Step
from jobscheduler.store import JobStore

from .store_support import NOW
from .test_store_workflows import stored

LATER = NOW + timedelta(minutes=5)


def child_of(spawner: Job, key: str, **fields: object) -> Job:
    """A child ``spawner`` spawned, as ``ctx.spawn`` stores it: waiting, marked."""
    assert spawner.step is not None
    spawned: dict[str, object] = {
        "id": new_job_id(),
        "idempotency_key": f"{spawner.idempotency_key}/{key}",
        "status": Status.WAITING,
        "spawned_by": spawner.id,
        "step": Step(name=f"{spawner.step.name}/{key}", parents=(spawner.id,)),
        "step_dirty": True,
    }
    return attrs.evolve(spawner, **{**spawned, **fields})


async def test_a_spawners_waiting_children_are_released_as_release_step_would(
    store: JobStore,
) -> None:
    _, a, b = await stored(store)
    due_now = child_of(a, "c1")
    due_later = child_of(a, "c2", scheduled_at=LATER + timedelta(hours=1))
    cancelled = child_of(a, "c3", status=Status.CANCELLED, step_dirty=False)
    elsewhere = child_of(b, "c1")
    for job in (due_now, due_later, cancelled, elsewhere):
        await store.insert(job)

    assert await store.release_spawned(a.id, LATER, 10) == 2

    for child in (due_now, due_later):
        expected = attrs.evolve(child, **states.release_step(child, now=LATER).set)
        assert await store.get(child.id) == expected
    assert (await store.get(due_now.id)).scheduled_at == LATER
    assert (await store.get(due_later.id)).scheduled_at == LATER + timedelta(hours=1)
    assert (await store.get(cancelled.id)).status is Status.CANCELLED
    assert (await store.get(elsewhere.id)).status is Status.WAITING
    assert await store.release_spawned(a.id, LATER, 10) == 0


async def test_a_release_takes_at_most_limit_children_and_the_counters_follow(
    store: JobStore,
) -> None:
    _, a, _ = await stored(store)
    children = [child_of(a, f"c{i}") for i in range(5)]
    await store.insert_many(children)
    before = (await store.count_jobs(a.tenant_id)).by_status

    assert [await store.release_spawned(a.id, LATER, 2) for _ in range(4)] == [2, 2, 1, 0]

    after = (await store.count_jobs(a.tenant_id)).by_status
    assert after[Status.WAITING] == before[Status.WAITING] - 5
    assert after[Status.PENDING] == before[Status.PENDING] + 5
    claimed = await store.claim_due(LATER, 10)
    assert {job.id for job in claimed} == {child.id for child in children}
