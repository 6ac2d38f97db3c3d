"""The JobStore contract, results and attempt records: a completion stores any JSON
result; each applied outcome appends one attempt record (and a lost one none), also through
``apply_many``, ``apply_many_lean`` and ``apply_bulk``; a record written twice is kept once;
old records are pruned. Run against every adapter (the ``store`` fixture in ``conftest.py``).
"""

from __future__ import annotations

from datetime import timedelta

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Attempt, Failure, Outcome
from jobscheduler.domain.model import Job, Status, new_job_id
from jobscheduler.store import JobStore

from .store_support import NOW, make_job, running_job


async def test_complete_stores_any_json_result(store: JobStore) -> None:
    result = {
        "a.b": 1,
        "$where": "not an operator here",
        "big": 2**70,
        "list": [1.5, None, "é", {"nested": True}],
    }
    running = await running_job(store)
    done = await store.apply(states.complete(running, token="tok-1", now=NOW, result=result))
    assert done is not None
    assert done.result == result
    assert (await store.get(running.id)).result == result


async def test_an_applied_outcome_appends_its_attempt_record(store: JobStore) -> None:
    running = await running_job(store, max_attempts=3)
    try:
        raise ValueError("bad address")
    except ValueError as exc:
        failure = Failure.from_exception(exc)
    later = NOW + timedelta(seconds=3)
    assert await store.apply(states.fail(running, token="tok-1", now=later, error=failure))
    [again] = await store.claim_due(NOW + timedelta(minutes=1), 1)
    _picked, second = await store.apply_many(
        [
            states.pick(again.id, worker="w2", token="t2", now=later),
            states.start(again.id, token="t2", now=later),
        ]
    )
    assert second is not None
    assert second.attempts == 2
    end = NOW + timedelta(seconds=9)
    assert await store.apply(states.complete(second, token="t2", now=end, result=[1]))

    failed, completed = await store.attempts(running.id)
    assert failed == Attempt(
        job_id=running.id,
        number=1,
        outcome=Outcome.FAILED,
        worker="w1",
        started_at=NOW,
        finished_at=later,
        error_type="ValueError",
        error_message="bad address",
        traceback=failure.traceback,
    )
    assert completed == Attempt(
        job_id=running.id,
        number=2,
        outcome=Outcome.COMPLETED,
        worker="w2",
        started_at=later,
        finished_at=end,
    )


async def test_apply_many_records_only_the_outcomes_that_applied(store: JobStore) -> None:
    first = await running_job(store, token="a")
    second = await running_job(store, token="b")
    results = await store.apply_many(
        [
            states.complete(first, token="a", now=NOW),
            states.complete(second, token="wrong", now=NOW),
        ]
    )
    assert [r is not None for r in results] == [True, False]
    assert [a.outcome for a in await store.attempts(first.id)] == [Outcome.COMPLETED]
    assert await store.attempts(second.id) == []


async def test_apply_many_lean_reads_back_only_the_jobs_asked_for(store: JobStore) -> None:
    # A pick that applies reports True (no row), its start the running job; a pick and a
    # completion that lose report False; a completion that applies reports True and still
    # records its attempt, and every change was applied as apply_many would.
    job = await store.insert(make_job())
    await store.claim_due(NOW, 1)
    other = await running_job(store, token="b")
    results = await store.apply_many_lean(
        [
            states.pick(job.id, worker="w", token="t", now=NOW),
            states.start(job.id, token="t", now=NOW),
            states.pick(job.id, worker="w2", token="t2", now=NOW),
            states.complete(other, token="wrong", now=NOW),
            states.complete(other, token="b", now=NOW),
        ],
        [False, True, False, False, False],
    )
    assert results[0] is True
    running = results[1]
    assert isinstance(running, Job)
    assert (running.status, running.claim_token, running.attempts) == (Status.RUNNING, "t", 1)
    assert results[2:] == [False, False, True]
    assert await store.get(job.id) == running
    assert (await store.get(other.id)).status is Status.COMPLETED
    assert [a.outcome for a in await store.attempts(other.id)] == [Outcome.COMPLETED]


async def test_apply_bulk_counts_the_changes_that_applied(store: JobStore) -> None:
    first = await running_job(store, token="a")
    second = await running_job(store, token="b")
    applied = await store.apply_bulk(
        [
            states.complete(first, token="a", now=NOW),
            states.complete(second, token="wrong", now=NOW),
        ]
    )
    assert applied == 1
    assert (await store.get(first.id)).status is Status.COMPLETED
    assert (await store.get(second.id)).status is Status.RUNNING


async def test_a_record_written_twice_is_kept_once(store: JobStore) -> None:
    # One record per (job, number, outcome): a repeated write (a retried request, a second
    # release of the same attempt number) keeps the first, so a job's history is bounded.
    job = await store.insert(make_job())
    for i in range(2):
        await store.claim_due(NOW, 1)
        claimed = await store.apply(states.pick(job.id, worker="w", token=f"t{i}", now=NOW))
        running = await store.apply(states.start(job.id, token=f"t{i}", now=NOW))
        assert claimed is not None
        assert running is not None
        at = NOW + timedelta(seconds=i)
        released = await store.apply(states.release(running, token=f"t{i}", now=at))
        assert released is not None
        assert released.attempts == 0
    [record] = await store.attempts(job.id)
    assert (record.number, record.outcome, record.finished_at) == (1, Outcome.RELEASED, NOW)


async def test_records_written_after_their_transition_are_kept_once_each(
    store: JobStore,
) -> None:
    # A writer that learns only afterwards that its transition applied (its reply was lost,
    # its retry found its own write) records the attempt then; a record already there is
    # kept as it was.
    running = await running_job(store, token="t")
    change = states.complete(running, token="t", now=NOW)
    assert await store.apply(change) is not None
    assert change.record is not None
    later = Attempt(
        job_id=running.id, number=1, outcome=Outcome.COMPLETED, finished_at=NOW + timedelta(1)
    )
    other = Attempt(job_id=running.id, number=1, outcome=Outcome.LOST, finished_at=NOW)
    await store.record_attempts([later, other])
    await store.record_attempts([])
    records = await store.attempts(running.id)
    assert {(r.outcome, r.finished_at) for r in records} == {
        (Outcome.COMPLETED, NOW),
        (Outcome.LOST, NOW),
    }
    assert len(records) == 2


async def test_attempts_of_an_unknown_job_are_empty(store: JobStore) -> None:
    assert await store.attempts(new_job_id()) == []


async def test_attempts_of_many_jobs_come_by_job_oldest_first(store: JobStore) -> None:
    first = Attempt(job_id=new_job_id(), number=1, outcome=Outcome.FAILED, finished_at=NOW)
    retry = attrs.evolve(first, number=2, outcome=Outcome.COMPLETED)
    rerun = attrs.evolve(first, run=1, number=1, finished_at=NOW - timedelta(days=1))
    other = Attempt(job_id=new_job_id(), number=1, outcome=Outcome.LOST, finished_at=NOW)
    await store.record_attempts([rerun, other, retry, first])
    many = [new_job_id() for _ in range(1200)]  # more than one read's worth of ids
    found = await store.attempts_of([first.job_id, *many, other.job_id])
    assert found == {first.job_id: [first, retry, rerun], other.job_id: [other]}
    assert await store.attempts_of([]) == {}


async def test_prune_attempts_deletes_records_finished_before_the_cutoff(store: JobStore) -> None:
    old = await running_job(store, token="a")
    assert await store.apply(states.complete(old, token="a", now=NOW))
    new = await running_job(store, token="b")
    assert await store.apply(states.complete(new, token="b", now=NOW + timedelta(days=2)))
    assert await store.prune_attempts(NOW + timedelta(days=1)) == 1
    assert await store.attempts(old.id) == []
    assert len(await store.attempts(new.id)) == 1
    assert await store.prune_attempts(NOW + timedelta(days=1)) == 0
