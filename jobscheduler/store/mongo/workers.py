"""The Mongo store's presence records (``workers`` collection) and the Overview's reads.

A mixin of :class:`~jobscheduler.store.mongo.store.MongoJobStore`. The Overview reads
counters and one index, in one worker thread:

- counts by status: the job counters (:mod:`.counts`), never a ``$group`` over every job;
- the oldest due job: ``status_scheduledAt``;
- the jobs that ended in each minute of the last hour: the counters of ends of its steps
  (:mod:`.ends`), one ``find`` of at most a few hundred small documents a tenant.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from pymongo import ASCENDING, IndexModel, MongoClient
from pymongo.collection import Collection
from pymongo.write_concern import WriteConcern

from jobscheduler.domain.model import Status, utc
from jobscheduler.domain.overview import OverviewStats, series_start
from jobscheduler.domain.workers import WorkerBeat
from jobscheduler.errors import StoreError
from jobscheduler.store.ends import series_of, step_of
from jobscheduler.store.query import counts_from

from . import counts as job_counts
from . import ends
from .codec import Document, stored_time
from .query import oldest_due
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
        jobs, counters, ended = self._collection(), self._counts(), self._ends()
        now = utc(now)
        start = series_start(now)

        def op() -> OverviewStats:
            found = job_counts.read(counters, None, tenant_id)
            series = series_of(ends.read(ended, tenant_id, step_of(start)), start)
            return OverviewStats(
                counts=counts_from(found, tenant_id, None, by_type=False).by_status,
                oldest_due_at=oldest_due(jobs, tenant_id, now),
                start=start,
                completed=series[Status.COMPLETED],
                failed=series[Status.DLQ],
            )

        return await self._call(op, "overview_stats", read=True)


__all__ = ["WORKERS_COLLECTION", "MongoWorkersMixin", "create_workers_indexes"]
