"""The MongoDB store's attempt records: their collection (beside ``jobs``), indexes, codec
and reads.

One document per (job, run, attempt number, outcome), whose ``_id`` is that key, so a
repeated write is a duplicate-key error the store ignores (the first record wins). The
transitions write them (:func:`write_records`, called by :mod:`.writes`);
:class:`MongoAttemptsMixin`, a mixin of :class:`~jobscheduler.store.mongo.store.MongoJobStore`,
reads and prunes them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from bson import ObjectId
from pymongo import ASCENDING, IndexModel
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError

from jobscheduler.domain.attempts import Attempt, Outcome
from jobscheduler.domain.model import Job, utc
from jobscheduler.domain.states import Change
from jobscheduler.errors import StoreError

from .codec import Document, stored_time
from .seam import MongoSeam

log = logging.getLogger(__name__)

#: Attempt records, beside the jobs: ``_id`` is ``<job id>:<number>:<outcome>`` in a job's
#: first run, ``<job id>:<run>:<number>:<outcome>`` in the runs its retries start.
ATTEMPTS_COLLECTION: Final = "attempts"
#: Most job ids one ``$in`` read of their records names.
IDS_PER_FIND: Final = 500

#: Indexes of the attempts collection (its ``_id`` is the unique per-record key).
ATTEMPT_INDEXES: Final = [
    IndexModel([("jobId", ASCENDING), ("number", ASCENDING)], name="jobId_number"),
    IndexModel([("finishedAt", ASCENDING)], name="finishedAt"),
]


def attempt_to_document(record: Attempt) -> Document:
    return {
        "_id": record.key,
        "jobId": record.job_id,
        "run": record.run,
        "number": record.number,
        "outcome": record.outcome.value,
        "worker": record.worker,
        "startedAt": None if record.started_at is None else utc(record.started_at),
        "finishedAt": utc(record.finished_at),
        "errorType": record.error_type,
        "errorMessage": record.error_message,
        "traceback": record.traceback,
    }


def document_to_attempt(doc: Mapping[str, Any]) -> Attempt:
    def aware(value: datetime | None) -> datetime | None:
        if value is None:
            return None
        return stored_time(value)

    finished = aware(doc["finishedAt"])
    assert finished is not None
    return Attempt(
        job_id=doc["jobId"],
        run=int(doc.get("run") or 0),  # a record from before runs were numbered: run 0
        number=int(doc["number"]),
        outcome=Outcome(doc["outcome"]),
        worker=doc.get("worker"),
        started_at=aware(doc.get("startedAt")),
        finished_at=finished,
        error_type=doc.get("errorType"),
        error_message=doc.get("errorMessage"),
        traceback=doc.get("traceback"),
    )


def write_records(
    collection: Collection[Document],
    changes: Sequence[Change],
    results: Sequence[Job | bool | None],
) -> None:
    """Append the attempt records of the changes that applied (``results[i]`` a Job or True):
    one unordered ``insert_many`` right after the transitions, in the same worker thread.
    Without transactions this is not atomic with them: a failure here is raised (see
    :func:`insert_records`), and the transitions stand."""
    docs = [
        attempt_to_document(change.record)
        for change, result in zip(changes, results, strict=True)
        if change.record is not None and result is not None and result is not False
    ]
    insert_records(collection, docs)


def insert_records(collection: Collection[Document], docs: Sequence[Document]) -> None:
    """Insert attempt records, a duplicate (already written) being a no-op. Any other
    failure is raised: the transitions they belong to stand, and their writer, told the
    write failed, tries again and finds them applied (:meth:`record_attempts` then writes
    the records)."""
    if not docs:
        return
    try:
        collection.insert_many(list(docs), ordered=False)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if any(error.get("code") != 11000 for error in errors):
            log.warning(
                "attempt records not all written",
                extra={"records": len(docs), "error": str(errors[:3])},
            )
            raise


def _of_tenant(jobs: Collection[Document], job_id: str, tenant: str) -> bool:
    """Whether a job of ``tenant`` has this id (blocking)."""
    if not ObjectId.is_valid(job_id):
        return False
    found = jobs.find_one({"_id": ObjectId(job_id), "tenantId": tenant}, projection={"_id": 1})
    return found is not None


class MongoAttemptsMixin(MongoSeam):
    """The attempt records' reads and their retention."""

    def _attempts_collection(self) -> Collection[Document]:
        if self._attempts is None:
            raise StoreError("MongoDB store is not started")
        return self._attempts

    async def attempts(self, job_id: str, *, tenant: str | None = None) -> list[Attempt]:
        records = self._attempts_collection()
        jobs = self._collection()

        def op() -> list[Attempt]:
            if tenant is not None and not _of_tenant(jobs, job_id, tenant):
                return []  # the records hold no tenant: the job's says whose they are
            found = [document_to_attempt(d) for d in records.find({"jobId": job_id})]
            # Sorted here, not by the server: a record from before runs were numbered has
            # no "run" field (it reads as run 0).
            return sorted(found, key=lambda r: (r.run, r.number, r.finished_at))

        return await self._call(op, "attempts", read=True)

    async def attempts_of(self, job_ids: Sequence[str]) -> dict[str, list[Attempt]]:
        records = self._attempts_collection()

        def op() -> dict[str, list[Attempt]]:
            found: dict[str, list[Attempt]] = {}
            for start in range(0, len(job_ids), IDS_PER_FIND):
                ids = list(job_ids[start : start + IDS_PER_FIND])
                for doc in records.find({"jobId": {"$in": ids}}):
                    record = document_to_attempt(doc)
                    found.setdefault(record.job_id, []).append(record)
            for job_records in found.values():  # sorted here, as in attempts()
                job_records.sort(key=lambda r: (r.run, r.number, r.finished_at))
            return found

        return await self._call(op, "attempts_of", read=True)

    async def record_attempts(self, records: Sequence[Attempt]) -> None:
        if not records:
            return
        collection = self._attempts_collection()
        docs = [attempt_to_document(record) for record in records]
        await self._call(lambda: insert_records(collection, docs), "record_attempts")

    async def prune_attempts(self, before: datetime) -> int:
        records = self._attempts_collection()
        query = {"finishedAt": {"$lt": utc(before)}}
        result = await self._call(lambda: records.delete_many(query), "prune_attempts")
        return int(result.deleted_count)
