"""The reads of workflow steps the settler, the executor and the API share: jobs by id (in
chunks the store accepts), a step's spawned children page by page, and the results a step's
handler sees as ``ctx.parents``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from jobscheduler.domain.model import Job, Status
from jobscheduler.store import JobStore, Reporting
from jobscheduler.store.query import MAX_QUERY_IDS, Cursor, JobQuery


async def read_jobs(store: Reporting, ids: Sequence[str]) -> list[Job]:
    """The jobs with these ids that exist (any tenant's), in no particular order."""
    found: list[Job] = []
    for start in range(0, len(ids), MAX_QUERY_IDS):
        chunk = tuple(ids[start : start + MAX_QUERY_IDS])
        found += await store.find_jobs(JobQuery(tenant_id=None, ids=chunk), len(chunk))
    return found


async def spawned_by(store: Reporting, spawner: str, status: Status) -> list[Job]:
    """The children ``spawner`` spawned that are in ``status``, read page by page."""
    query = JobQuery(tenant_id=None, spawned_by=spawner, statuses=(status,))
    found: list[Job] = []
    after: Cursor | None = None
    while True:
        page = await store.find_jobs(query, MAX_QUERY_IDS, after)
        found += page
        if len(page) < MAX_QUERY_IDS:
            return found
        after = Cursor.after(page[-1])


class CompletedJobs:
    """The newest ``size`` completed jobs read as parents, by id. A completed job never
    changes (no transition leaves ``completed``), so the children of one spawner -- a
    fan-out of thousands -- read it once, not once each."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._jobs: OrderedDict[str, Job] = OrderedDict()

    def get(self, job_id: str) -> Job | None:
        job = self._jobs.get(job_id)
        if job is not None:
            self._jobs.move_to_end(job_id)
        return job

    def add(self, job: Job) -> None:
        if job.status is not Status.COMPLETED:
            return
        self._jobs[job.id] = job
        self._jobs.move_to_end(job.id)
        while len(self._jobs) > self._size:
            self._jobs.popitem(last=False)


def known_parent_results(job: Job, completed: CompletedJobs) -> dict[str, Any] | None:
    """``ctx.parents`` of a step whose parents ``completed`` all holds and which waits for
    no spawned children (a fan-out's child: its spawner), with no read; else None."""
    if job.step is None or job.step.after_children_of:
        return None
    parents = [completed.get(p) for p in job.step.parents]
    if any(p is None for p in parents):
        return None
    return _by_name(p for p in parents if p is not None)


def _by_name(jobs: Iterable[Job]) -> dict[str, Any]:
    """Each job's result by its step name (a job that is not a step: by id)."""
    return {job.step.name if job.step else job.id: job.result for job in jobs}


async def parent_results(
    store: JobStore, job: Job, completed: CompletedJobs | None = None
) -> dict[str, Any]:
    """``ctx.parents`` of a step: the result of each job it waits for, by step name (for a
    step waiting for the children a step spawned, theirs too, ``<spawner>/<key>``); empty
    for a job that is not a step. ``completed`` holds parents read before (and keeps the
    completed ones read now)."""
    if job.step is None or not job.step.parents:
        return {}
    known = completed or CompletedJobs(0)
    parents = [p for p in map(known.get, job.step.parents) if p is not None]
    missing = [p for p in job.step.parents if known.get(p) is None]
    if missing:
        read = await read_jobs(store, missing)
        for parent in read:
            known.add(parent)
        parents += read
    out = _by_name(parents)
    spawners = {p.id for p in parents if p.step is not None and p.step.spawns}
    for spawner in job.step.after_children_of:
        if spawner in spawners:
            out.update(await store.spawned_results(spawner))
    return out
