"""``ctx.parents`` read through the executor's cache of completed parents: the children of
one spawner read it once, not once each; a step the executor completed itself is not read
at all; a parent not completed (a clean-up step's dlq parent, which may be retried) is read
every time; the cache keeps only the newest; a step whose parents the cache all holds is answered
without a read."""

from __future__ import annotations

from typing import Any

import attrs

from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.steps import Step
from jobscheduler.roles.executor.children import Children
from jobscheduler.roles.executor.run import read_parents
from jobscheduler.roles.executor.steps import StepEnds
from jobscheduler.roles.workflows.reads import CompletedJobs, known_parent_results, parent_results
from jobscheduler.store.query import JobQuery

from .conftest import DepsFactory, make_job


class CountingStore:
    """Answers ``find_jobs`` by id from ``jobs`` and counts the calls."""

    def __init__(self, *jobs: Job) -> None:
        self.jobs = {job.id: job for job in jobs}
        self.reads = 0

    async def find_jobs(self, query: JobQuery, limit: int, *args: Any) -> list[Job]:
        self.reads += 1
        return [self.jobs[i] for i in query.ids or () if i in self.jobs][:limit]


def step(name: str, *parents: Job, status: Status = Status.PENDING, result: Any = None) -> Job:
    job = attrs.evolve(
        make_job(status=status), step=Step(name=name, parents=[p.id for p in parents])
    )
    return attrs.evolve(job, result=result)


async def test_the_children_of_one_spawner_read_it_once() -> None:
    fan = step("fan", status=Status.COMPLETED, result={"n": 3})
    children = [step(f"fan/c{i}", fan) for i in range(3)]
    store = CountingStore(fan)
    cache = CompletedJobs()
    for child in children:
        assert await parent_results(store, child, cache) == {"fan": {"n": 3}}
    assert store.reads == 1


async def test_a_step_the_executor_completed_is_read_by_its_children_from_memory(
    make_deps: DepsFactory,
) -> None:
    deps = make_deps()
    children = Children(deps)
    export = step("export", status=Status.COMPLETED, result={"rows": 3})
    StepEnds(deps, children).ended(export)
    store = CountingStore()
    transform = step("transform", export)
    assert await parent_results(store, transform, children.completed_parents) == {
        "export": {"rows": 3}
    }
    assert store.reads == 0


async def test_a_parent_not_completed_is_read_each_time_and_the_oldest_is_forgotten() -> None:
    failed = step("audit", status=Status.DLQ)
    clean_up = step("clean-up", failed)
    store = CountingStore(failed)
    cache = CompletedJobs(size=1)
    for _ in range(2):
        assert await parent_results(store, clean_up, cache) == {"audit": None}
    assert store.reads == 2
    first, second = (step(n, status=Status.COMPLETED) for n in ("a", "b"))
    cache.add(first)
    cache.add(second)
    assert cache.get(first.id) is None
    assert cache.get(second.id) == second


async def test_a_step_whose_parents_are_all_held_is_answered_without_a_read_or_a_bound() -> None:
    fan = step("fan", status=Status.COMPLETED, result={"n": 3})
    child = step("fan/c0", fan)
    cache = CompletedJobs()
    assert known_parent_results(child, cache) is None  # not held yet: read_parents reads it
    cache.add(fan)
    assert known_parent_results(child, cache) == {"fan": {"n": 3}}
    assert await read_parents(CountingStore(), child, cache) == ({"fan": {"n": 3}}, None)
    sink = attrs.evolve(child, step=Step(name="sink", parents=[fan.id], after_children_of=[fan.id]))
    assert known_parent_results(sink, cache) is None  # its children's results are read
