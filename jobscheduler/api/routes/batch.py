"""Bulk enqueue: ``POST /jobs/batch`` with up to 1,000 create bodies in one request.

Each body is validated on its own and answered in order with its own status (201 with the
job, 409 with the id of the job holding the key, 400 with the reason); the request as a
whole answers 200. The valid jobs are stored with one :meth:`JobStore.insert_many` (one
transaction in SQLite, one unordered ``insert_many`` plus one lookup of taken keys in
MongoDB). A body that is not ``{"jobs": [...]}``, or holds more than 1,000 jobs, is a 400.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from jobscheduler.domain.model import Job, job_to_json
from jobscheduler.domain.validation import PayloadValidator, parse_create_request
from jobscheduler.errors import DuplicateJob, ValidationError
from jobscheduler.store.base import MAX_INSERT_MANY, InsertOutcome

log = logging.getLogger(__name__)

#: Most jobs one ``POST /jobs/batch`` may carry.
MAX_BATCH = MAX_INSERT_MANY


def parse_batch_request(body: Any) -> list[Any]:
    """The create bodies of a batch request (each still to be validated on its own).

    Raises ValidationError when the request is not ``{"jobs": [...]}`` with at most
    :data:`MAX_BATCH` entries.
    """
    if not isinstance(body, dict):
        raise ValidationError('request body must be a JSON object: {"jobs": [...]}')
    unknown = sorted(set(body) - {"jobs"})
    if unknown:
        raise ValidationError(f"unknown field(s): {', '.join(unknown)}")
    jobs = body.get("jobs")
    if not isinstance(jobs, list):
        raise ValidationError("jobs: must be an array of job create requests")
    if len(jobs) > MAX_BATCH:
        raise ValidationError(f"jobs: at most {MAX_BATCH} per request, got {len(jobs)}")
    return jobs


async def create_batch(
    insert_many: Callable[[Sequence[Job]], Awaitable[list[InsertOutcome]]],
    items: Sequence[Any],
    *,
    now: datetime,
    job_types: Mapping[str, PayloadValidator | None],
    max_attempts_defaults: Mapping[str, int] | None = None,
    trace_parent: str | None = None,
) -> tuple[list[dict[str, Any]], list[Job]]:
    """Validate and store a batch with ``insert_many`` (the store's, bounded by the caller);
    returns (one answer per item, in order; the jobs stored). Every job keeps
    ``trace_parent`` (the batch request's trace).

    Raises StoreError when the store fails (the whole request is then a 503; any of its
    jobs may or may not be stored, and a retry of the same batch is safe: stored ones come
    back as 409 with their ids).
    """
    answers: list[dict[str, Any] | None] = [None] * len(items)
    valid: list[Job] = []
    positions: list[int] = []
    for i, item in enumerate(items):
        try:
            job = parse_create_request(
                item, now=now, job_types=job_types, max_attempts_defaults=max_attempts_defaults
            )
        except ValidationError as exc:
            answers[i] = {"status": 400, "error": str(exc)}
            continue
        if trace_parent is not None:
            job = attrs.evolve(job, trace_parent=trace_parent)
        valid.append(job)
        positions.append(i)
    created: list[Job] = []
    outcomes = await insert_many(valid) if valid else []
    for i, outcome in zip(positions, outcomes, strict=True):
        if isinstance(outcome, Job):
            answers[i] = {"status": 201, "job": job_to_json(outcome)}
            created.append(outcome)
        elif isinstance(outcome, DuplicateJob):
            answer: dict[str, Any] = {"status": 409, "error": str(outcome)}
            if outcome.existing_id is not None:
                answer["jobId"] = outcome.existing_id
            answers[i] = answer
        else:
            answers[i] = {"status": 400, "error": str(outcome)}
    done = [answer for answer in answers if answer is not None]
    assert len(done) == len(items)
    return done, created
