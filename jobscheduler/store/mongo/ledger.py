"""The MongoDB store's cron ledger: its collection (beside ``jobs``), indexes, codec and
queries; and the templates holding a buffered fire time.

One document per (template, fire time), whose ``_id`` is that key, so a second writer's
insert is a duplicate-key error and the first record stays. :class:`MongoLedgerMixin` is a
mixin of :class:`~jobscheduler.store.mongo.store.MongoJobStore`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import BulkWriteError

from jobscheduler.domain.cron import Occurrence, OccurrenceStatus, SkipReason
from jobscheduler.domain.model import Job, utc
from jobscheduler.errors import StoreError
from jobscheduler.store.jobs import OccurrenceQuery
from jobscheduler.store.query import BUFFERED

from .codec import FIELDS, Document, document_to_job, job_filter, stored_time
from .seam import MongoSeam, durable_collection

LEDGER_COLLECTION: Final = "occurrences"

LEDGER_INDEXES: Final = [
    IndexModel([("templateId", ASCENDING), ("fireAt", DESCENDING)], name="templateId_fireAt"),
    IndexModel(
        [("templateId", ASCENDING), ("status", ASCENDING), ("fireAt", DESCENDING)],
        name="templateId_status_fireAt",
    ),
    IndexModel([("recordedAt", ASCENDING)], name="recordedAt"),
]

_DUPLICATE_KEY = 11000


def ledger_collection(database: Database[Document]) -> Collection[Document]:
    return durable_collection(database, LEDGER_COLLECTION)


def create_ledger_indexes(collection: Collection[Document]) -> None:
    for index in LEDGER_INDEXES:  # one per command (see the jobs indexes in mongo.py)
        collection.create_indexes([index])


def _key(template_id: str, fire_at: datetime) -> str:
    return f"{template_id}:{round(fire_at.timestamp() * 1000)}"


def to_document(record: Occurrence) -> Document:
    return {
        "_id": _key(record.template_id, record.fire_at),
        "templateId": record.template_id,
        "tenantId": record.tenant_id,
        "fireAt": utc(record.fire_at),
        "status": record.status.value,
        "reason": None if record.reason is None else record.reason.value,
        "runId": record.run_id,
        "recordedAt": utc(record.recorded_at),
        "cancelledRunId": record.cancelled_run_id,
    }


def from_document(doc: Mapping[str, Any]) -> Occurrence:
    reason = doc.get("reason")
    return Occurrence(
        template_id=doc["templateId"],
        tenant_id=doc["tenantId"],
        fire_at=stored_time(doc["fireAt"]),
        status=OccurrenceStatus(doc["status"]),
        reason=None if reason is None else SkipReason(reason),
        run_id=doc.get("runId"),
        recorded_at=stored_time(doc["recordedAt"]),
        cancelled_run_id=doc.get("cancelledRunId"),
    )


def record(
    collection: Collection[Document], records: Sequence[Occurrence]
) -> list[tuple[Occurrence, bool]]:
    """Insert each record unless its key exists (unordered; duplicates ignored), then read
    back the stored record of each key, in order, with whether this call wrote it."""
    docs = [to_document(r) for r in records]
    if not docs:
        return []
    refused: set[int] = set()
    try:
        collection.insert_many(docs, ordered=False)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if any(error.get("code") != _DUPLICATE_KEY for error in errors):
            raise
        refused = {int(error["index"]) for error in errors}
    ids = [d["_id"] for d in docs]
    stored = {d["_id"]: from_document(d) for d in collection.find({"_id": {"$in": ids}})}
    # A key given twice in one call is written by its first record only.
    first = {key: i for i, key in reversed(list(enumerate(ids)))}
    return [(stored[key], i not in refused and first[key] == i) for i, key in enumerate(ids)]


def select(
    collection: Collection[Document], query: OccurrenceQuery, limit: int
) -> list[Occurrence]:
    where: Document = {"templateId": query.template_id}
    if query.tenant is not None:
        where["tenantId"] = query.tenant
    if query.before is not None:
        where["fireAt"] = {"$lt": utc(query.before)}
    if query.statuses is not None:
        where["status"] = {"$in": [s.value for s in query.statuses]}
    cursor = collection.find(where, sort=[("fireAt", DESCENDING)], limit=limit)
    return [from_document(d) for d in cursor]


def prune(collection: Collection[Document], before: datetime) -> int:
    return collection.delete_many({"recordedAt": {"$lt": utc(before)}}).deleted_count


class MongoLedgerMixin(MongoSeam):
    """The cron ledger beside the jobs, and the templates that hold a buffered fire time."""

    def _ledger(self) -> Collection[Document]:
        if self._client is None:
            raise StoreError("MongoDB store is not started")
        return ledger_collection(self._client.get_database(self._database))

    async def record_occurrences(
        self, records: Sequence[Occurrence]
    ) -> list[tuple[Occurrence, bool]]:
        if not records:
            return []
        ledger = self._ledger()
        return await self._call(lambda: record(ledger, records), "record_occurrences")

    async def occurrences(self, query: OccurrenceQuery, *, limit: int) -> list[Occurrence]:
        ledger = self._ledger()
        return await self._call(
            lambda: select(ledger, query, limit),
            "occurrences",
            read=True,
        )

    async def prune_occurrences(self, before: datetime) -> int:
        ledger = self._ledger()
        return await self._call(lambda: prune(ledger, before), "prune_occurrences")

    async def buffered_templates(self, limit: int) -> list[Job]:
        jobs = self._collection()
        query = job_filter(BUFFERED)
        sort = [(FIELDS["cron_buffered"], ASCENDING)]

        def op() -> list[Job]:
            return [document_to_job(d) for d in jobs.find(query, sort=sort, limit=limit)]

        return await self._call(op, "buffered_templates", read=True)
