"""The JobStore contract for a job's ``trace_parent``: every adapter keeps it as given,
through inserts (one and many), claims and transitions, and a job without one reads None."""

from __future__ import annotations

import attrs

from jobscheduler.domain import states
from jobscheduler.store import JobStore

from .store_support import NOW, make_job

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


async def test_a_job_keeps_its_trace_parent_through_insert_claim_and_transitions(
    store: JobStore,
) -> None:
    job = await store.insert(attrs.evolve(make_job(), trace_parent=TRACE))
    assert job.trace_parent == TRACE
    assert (await store.get(job.id)).trace_parent == TRACE
    [queued] = await store.claim_due(NOW, 10)
    assert queued.trace_parent == TRACE
    picked = await store.apply(states.pick(job.id, worker="w", token="t", now=NOW))
    assert picked is not None
    assert picked.trace_parent == TRACE
    running = await store.apply(states.start(job.id, token="t", now=NOW))
    assert running is not None
    assert running.trace_parent == TRACE


async def test_insert_many_keeps_each_jobs_trace_parent_and_none_reads_none(
    store: JobStore,
) -> None:
    traced, other, plain = (
        attrs.evolve(make_job(), trace_parent=TRACE),
        attrs.evolve(make_job(), trace_parent=OTHER),
        make_job(),
    )
    await store.insert_many([traced, other, plain])
    assert (await store.get(traced.id)).trace_parent == TRACE
    assert (await store.get(other.id)).trace_parent == OTHER
    assert (await store.get(plain.id)).trace_parent is None
