"""The reads of workflow steps the settler, the executor and the API share: jobs by id (in
chunks the store accepts), a step's spawned children page by page, and the results a step's
handler sees as ``ctx.parents``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobscheduler.domain.model import Job, Status
from jobscheduler.store import Reporting
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


async def parent_results(store: Reporting, job: Job) -> dict[str, Any]:
    """``ctx.parents`` of a step: the result of each job it waits for, by step name (for a
    step waiting for the children a step spawned, theirs too, ``<spawner>/<key>``); empty
    for a job that is not a step."""
    if job.step is None or not job.step.parents:
        return {}
    parents = await read_jobs(store, job.step.parents)
    out = {p.step.name if p.step else p.id: p.result for p in parents}
    spawners = {p.id: p for p in parents if p.step is not None and p.step.spawns}
    for spawner in job.step.after_children_of:
        if spawner in spawners:
            for child in await spawned_by(store, spawner, Status.COMPLETED):
                out[child.step.name if child.step else child.id] = child.result
    return out
