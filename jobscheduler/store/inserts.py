"""What every adapter's ``insert`` and ``insert_many`` share: the first job of each
(tenant, idempotency key) of a batch wins, and the answer of each later one names the job
holding its key."""

from __future__ import annotations

from collections.abc import Sequence

from jobscheduler.domain.model import Job
from jobscheduler.errors import DuplicateJob

from .base import InsertOutcome


def first_of_each_key(jobs: Sequence[Job]) -> tuple[list[Job], dict[int, int]]:
    """Split a batch into the jobs to store (the first of each (tenant, idempotency key), in
    order) and ``{index of a later duplicate: index of the first job with its key}``."""
    first_index: dict[tuple[str, str], int] = {}
    unique: list[Job] = []
    later: dict[int, int] = {}
    for i, job in enumerate(jobs):
        seen = first_index.get((job.tenant_id, job.idempotency_key))
        if seen is None:
            first_index[(job.tenant_id, job.idempotency_key)] = i
            unique.append(job)
        else:
            later[i] = seen
    return unique, later


def duplicate_of(job: Job, existing_id: str | None) -> DuplicateJob:
    return DuplicateJob(
        f"idempotencyKey {job.idempotency_key!r} is already used by another job",
        existing_id=existing_id,
    )


def spread_outcomes(
    jobs: Sequence[Job], stored: Sequence[InsertOutcome], later: dict[int, int]
) -> list[InsertOutcome]:
    """The outcomes of a whole batch from those of its first-of-each-key jobs (``stored``,
    in order): a later duplicate points at the first job of its key (or at its holder)."""
    it = iter(stored)
    outcomes: list[InsertOutcome] = []
    for i, job in enumerate(jobs):
        if i not in later:
            outcomes.append(next(it))
            continue
        first = outcomes[later[i]]
        if isinstance(first, Job):
            outcomes.append(duplicate_of(job, first.id))
        elif isinstance(first, DuplicateJob):
            outcomes.append(duplicate_of(job, first.existing_id))
        else:  # the first of the key was not storable: it still wins, holding nothing
            outcomes.append(duplicate_of(job, None))
    return outcomes
