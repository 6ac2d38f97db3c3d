"""The Mongo store's presence records (``workers`` collection) and the Overview's reads.

A mixin of :class:`~jobscheduler.store.mongo.store.MongoJobStore`. Every Overview read is one
indexed query per status, in the form index-using servers serve best (equalities and a range
on top-level fields):

- counts by status: the store's one count (:func:`.query.count`), one ``count`` command
  per status on ``{tenantId, status}`` (the ``tenant_status_createdAt`` /
  ``status_createdAt`` indexes; MongoDB answers it with a COUNT_SCAN, the test stack's
  patched FerretDB with one SQL ``COUNT(*)``), never a ``$group`` over every job;
- the oldest due job: ``status_scheduledAt``;
- the jobs finished in each minute of the last hour: one ``count`` per status and minute on
  ``status_updatedAt``. Reading the finished jobs' ``updatedAt`` instead is one query, but
  the test stack's FerretDB decodes every document it returns (2,500 jobs finished in the
  last hour: 0.6-1.0 s, measured at load 12-15; the 120 counts: 0.10-0.18 s). On MongoDB
  each count is a COUNT_SCAN of a few index keys.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from pymongo import ASCENDING, IndexModel, MongoClient
from pymongo.collection import Collection
from pymongo.write_concern import WriteConcern

from jobscheduler.domain.model import Status, utc
from jobscheduler.domain.overview import SERIES_MINUTES, OverviewStats, series_start
from jobscheduler.domain.workers import WorkerBeat
from jobscheduler.errors import StoreError
from jobscheduler.store.query import counts_from

from . import counts as job_counts
from .codec import Document, stored_time
from .query import count_command, ended_in, oldest_due
from .seam import MongoSeam

WORKERS_COLLECTION: Final = "workers"
WORKERS_INDEXES: Final = [IndexModel([("expiresAt", ASCENDING)], name="expiresAt")]


def create_workers_indexes(client: MongoClient[Document], database: str) -> None:
    """Create the workers collection's index (one per command, as for the jobs)."""
    workers = client.get_database(database).get_collection(WORKERS_COLLECTION)
    for index in WORKERS_INDEXES:
        workers.create_indexes([index])


def beat_to_document(beat: WorkerBeat) -> Document:
    return {
        "_id": beat.id,
        "role": beat.role,
        "host": beat.host,
        "pid": beat.pid,
        "jobTypes": list(beat.job_types),
        "inFlight": beat.in_flight,
        "capacity": beat.capacity,
        "leader": beat.leader,
        "startedAt": utc(beat.started_at),
        "seenAt": utc(beat.seen_at),
        "expiresAt": utc(beat.expires_at),
    }


def document_to_beat(doc: Document) -> WorkerBeat:
    return WorkerBeat(
        id=str(doc["_id"]),
        role=str(doc["role"]),
        host=str(doc["host"]),
        pid=int(doc["pid"]),
        job_types=tuple(str(t) for t in doc.get("jobTypes") or ()),
        in_flight=int(doc.get("inFlight") or 0),
        capacity=int(doc.get("capacity") or 0),
        leader=bool(doc.get("leader")),
        started_at=stored_time(doc["startedAt"]),
        seen_at=stored_time(doc["seenAt"]),
        expires_at=stored_time(doc["expiresAt"]),
    )


class MongoWorkersMixin(MongoSeam):
    """Presence records and the Overview's figures in the store's database."""

    def _workers(self) -> Collection[Document]:
        if self._client is None:
            raise StoreError("MongoDB store is not started")
        return self._client.get_database(self._database).get_collection(
            WORKERS_COLLECTION, write_concern=WriteConcern(w=1)
        )

    async def beat_worker(self, beat: WorkerBeat) -> None:
        workers = self._workers()
        doc = beat_to_document(beat)

        def op() -> None:
            workers.replace_one({"_id": beat.id}, doc, upsert=True)

        await self._call(op, "beat_worker")

    async def live_workers(self, now: datetime) -> list[WorkerBeat]:
        workers = self._workers()

        def op() -> list[WorkerBeat]:
            found = workers.find({"expiresAt": {"$gt": utc(now)}})
            return sorted((document_to_beat(d) for d in found), key=lambda b: (b.role, b.id))

        return await self._call(op, "live_workers", read=True)

    async def forget_worker(self, worker_id: str) -> None:
        workers = self._workers()
        await self._call(lambda: workers.delete_one({"_id": worker_id}), "forget_worker")

    async def prune_workers(self, now: datetime) -> int:
        workers = self._workers()

        def op() -> int:
            return workers.delete_many({"expiresAt": {"$lte": utc(now)}}).deleted_count

        return await self._call(op, "prune_workers")

    async def overview_stats(self, tenant_id: str | None, now: datetime) -> OverviewStats:
        jobs = self._collection()
        now = utc(now)
        start = series_start(now)

        def count(query: Document) -> int:
            return count_command(jobs, query)

        def per_minute(status: Status, total: int) -> tuple[int, ...]:
            # No job in the status, or none that ended in it within the hour (often dlq, or
            # a quiet tenant): zero or one count instead of sixty.
            hour = {"$gte": start, "$lt": start + timedelta(minutes=SERIES_MINUTES)}
            ended = ended_in(tenant_id, status)
            if total == 0 or count({**ended, "updatedAt": hour}) == 0:
                return (0,) * SERIES_MINUTES
            minutes = []
            for minute in range(SERIES_MINUTES):
                since = start + timedelta(minutes=minute)
                within = {"$gte": since, "$lt": since + timedelta(minutes=1)}
                minutes.append(count({**ended, "updatedAt": within}))
            return tuple(minutes)

        counters = self._counts()

        def op() -> OverviewStats:
            found = job_counts.read(counters, None, tenant_id)
            counts = counts_from(found, tenant_id, None, by_type=False).by_status
            return OverviewStats(
                counts=counts,
                oldest_due_at=oldest_due(jobs, tenant_id, now),
                start=start,
                completed=per_minute(Status.COMPLETED, counts[Status.COMPLETED]),
                failed=per_minute(Status.DLQ, counts[Status.DLQ]),
            )

        # One worker thread: the counts are small round trips, mostly the server's CPU;
        # spreading them over 4 or 8 threads was slower on the 2-core test machine
        # (134 ms median in one thread, 218 ms in 4, 355 ms in 8; load 12-13).
        return await self._call(op, "overview_stats", read=True)


__all__ = ["WORKERS_COLLECTION", "MongoWorkersMixin", "create_workers_indexes"]
