"""The JobStore contract, the results of a step's spawned children (``spawned_results``):
each completed child's result by its step name -- what a step waiting for them sees in
``ctx.parents`` -- and nothing of a child that did not complete or of another spawner's.
Run against every adapter."""

from __future__ import annotations

from jobscheduler.domain.model import Status
from jobscheduler.store import JobStore

from .store_support import NOW
from .test_store_spawned_release import child_of
from .test_store_workflows import stored


def ended(status: Status, result: object = None) -> dict[str, object]:
    return {"status": status, "result": result, "finished_at": NOW, "step_dirty": False}


async def test_the_completed_childrens_results_by_step_name(store: JobStore) -> None:
    _, a, b = await stored(store)
    assert a.step is not None
    children = [
        child_of(a, "rows", **ended(Status.COMPLETED, {"rows": [1, 2], "name": "é"})),
        child_of(a, "nothing", **ended(Status.COMPLETED)),
        child_of(a, "zero", **ended(Status.COMPLETED, 0)),
        child_of(a, "failed", **ended(Status.DLQ)),
        child_of(a, "cancelled", **ended(Status.CANCELLED)),
        child_of(a, "waiting"),
        child_of(b, "elsewhere", **ended(Status.COMPLETED, "b's")),
    ]
    await store.insert_many(children)

    name = a.step.name
    assert await store.spawned_results(a.id) == {
        f"{name}/rows": {"rows": [1, 2], "name": "é"},
        f"{name}/nothing": None,
        f"{name}/zero": 0,
    }


async def test_a_step_that_spawned_nothing_has_no_results(store: JobStore) -> None:
    _, a, _ = await stored(store)
    assert await store.spawned_results(a.id) == {}
    assert await store.spawned_results("no-such-job") == {}
