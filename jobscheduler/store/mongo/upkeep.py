"""The MongoDB store's upkeep: the counters' reads and reconcile, pruning, retention
overrides (see :mod:`jobscheduler.store.upkeep`; the counters' writes are in
:mod:`.counts`, called by every write of the jobs)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Final

import attrs
import trio
from bson import ObjectId
from pymongo import ASCENDING, DeleteMany, DeleteOne, IndexModel, UpdateOne
from pymongo.collection import Collection

from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.retention import Override, PruneSummary, Scope
from jobscheduler.domain.states import FINAL
from jobscheduler.store.ends import step_of
from jobscheduler.store.query import CountKey, Statuses

from . import counts, ends
from .codec import FIELDS, Document, document_to_job
from .seam import MongoSeam

log = logging.getLogger(__name__)

RETENTION_COLLECTION: Final = "retention"
PRUNE_COLLECTION: Final = "prune_sweeps"

#: Finished one-off jobs by (status, tenant, type), oldest finish first: the prune's reads.
PRUNE_INDEX: Final = IndexModel(
    [
        (FIELDS["status"], ASCENDING),
        (FIELDS["tenant_id"], ASCENDING),
        (FIELDS["job_type"], ASCENDING),
        (FIELDS["finished_at"], ASCENDING),
    ],
    name="status_tenant_jobType_finishedAt",
)

#: Seconds between the reconcile's two looks at the counters: longer than a counters'
#: write takes to follow its jobs' write.
RECONCILE_SETTLE = 2.0

#: Seconds one slice of a prune's deletes aims to take, and its size in jobs: the first
#: slice's, and the bounds the size is kept within as it follows the time slices take.
PRUNE_SLICE_SECONDS: Final = 0.05
PRUNE_SLICE_FIRST: Final = 50
PRUNE_SLICE_BOUNDS: Final = (10, 500)

#: Documents one backfill statement batch sets ``finishedAt`` on.
_BACKFILL_BATCH = 500


def prepare_upkeep(jobs: Collection[Document], counters: Collection[Document]) -> None:
    """At start (blocking): the pruning index; ``finishedAt`` on finished jobs written
    before it existed; the counters, counted once if the collection has none yet."""
    jobs.create_indexes([PRUNE_INDEX])
    counters.create_indexes(counts.COUNTS_INDEXES)
    status, finished, updated = FIELDS["status"], FIELDS["finished_at"], FIELDS["updated_at"]
    missing = {status: {"$in": [s.value for s in FINAL]}, finished: None}
    while True:
        batch = list(jobs.find(missing, projection={updated: True}, limit=_BACKFILL_BATCH))
        if not batch:
            break
        jobs.bulk_write(
            [UpdateOne({"_id": d["_id"]}, {"$set": {finished: d[updated]}}) for d in batch],
            ordered=False,
        )
    if counters.find_one({}) is None and jobs.find_one({}, projection={"_id": True}):
        # Jobs written before the counters: counted once (a pair whose counters move
        # meanwhile is left to the reaper's reconcile).
        counts.correct(counters, counts.drifts(jobs, counters))


class MongoUpkeepMixin(MongoSeam):
    """Counters, pruning and retention overrides on the store's database."""

    def _retention(self) -> Collection[Document]:
        counters = self._counts()
        return counters.database.get_collection(RETENTION_COLLECTION)

    async def job_counters(self, statuses: Statuses = None) -> dict[CountKey, int]:
        counters = self._counts()
        return await self._call(lambda: counts.read(counters, statuses), "job_counters", read=True)

    async def reconcile_counts(self) -> dict[CountKey, tuple[int, int]]:
        """From the indexes, twice RECONCILE_SETTLE apart (:func:`.counts.drifts`): only a
        counter off by the same amount both times is moved, by ``$inc``, so neither a
        transition whose counters' write is still on its way nor one counted meanwhile is
        mistaken for a drift."""
        jobs, counters = self._collection(), self._counts()
        first = await self._call(lambda: counts.drifts(jobs, counters), "reconcile_counts")
        if not first:
            return {}
        await trio.sleep(RECONCILE_SETTLE)
        second = await self._call(
            lambda: counts.drifts(jobs, counters, first), "reconcile_counts", read=True
        )
        confirmed = counts.confirm(first, second)
        if confirmed:
            await self._call(lambda: counts.correct(counters, confirmed), "reconcile_counts")
            log.warning(
                "job counters repaired",
                extra={"counters": sum(len(off) for off in confirmed.values())},
            )
        return {
            (tenant, status, job_type): kept_actual
            for (tenant, job_type), off in confirmed.items()
            for status, kept_actual in off.items()
        }

    async def expired_jobs(self, key: CountKey, before: datetime, limit: int) -> list[Job]:
        tenant, status, job_type = key
        query = {
            FIELDS["status"]: Status(status).value,
            FIELDS["tenant_id"]: tenant,
            FIELDS["job_type"]: job_type,
            FIELDS["finished_at"]: {"$lt": utc(before)},
            FIELDS["cron"]: None,
            FIELDS["workflow_id"]: None,  # steps are kept with their workflow
        }
        sort = [(FIELDS["finished_at"], ASCENDING)]
        jobs = self._collection()

        def op() -> list[Job]:
            return [document_to_job(d) for d in jobs.find(query, sort=sort, limit=limit)]

        return await self._call(op, "expired_jobs", read=True)

    async def delete_jobs(self, jobs: Sequence[Job]) -> int:
        """In paced slices (:class:`_Pace`), each by :meth:`_delete_slice`: a store that
        runs one write at a time (FerretDB on SQLite: 2.5 s for a bulk delete of 2,000)
        makes others wait for one slice at most."""
        batch = list(jobs)
        deleted, pace = 0, _Pace()
        while batch:
            part, batch = batch[: pace.size], batch[pace.size :]
            with pace.timed():
                deleted += await self._delete_slice(part)
            if batch:
                await pace.rest()
        return deleted

    async def prune_expired(self, key: CountKey, before: datetime, limit: int) -> int:
        """Read and delete in paced slices (as :meth:`delete_jobs`), the read within the
        slice's time: a sorted read of 2,000 jobs takes FerretDB about a second."""
        deleted = seen = 0
        pace = _Pace()
        while seen < limit:
            asked = min(pace.size, limit - seen)
            with pace.timed():
                part = await self.expired_jobs(key, before, asked)
                deleted += await self._delete_slice(part)
            seen += len(part)
            if len(part) < asked:
                break
            await pace.rest()
        return deleted

    async def _delete_slice(self, jobs: Sequence[Job]) -> int:
        """One bulk write of a ``delete_one`` per job, by its id, of the job still in its
        status and finished no later than it was (a job retried and finished again since
        is later); then their attempt records, one ``delete_many`` per job, and the
        counters. A job without ``finished_at`` is not finished: left alone.

        Each delete names one id: a MongoDB-protocol server that answers ``_id: {$in: ...}``
        by scanning the collection (FerretDB: 12-15 s a query at 100,000 jobs) finds one id
        at once. Which jobs are gone is read back only when fewer were deleted than asked."""
        ended = [(job, job.finished_at) for job in jobs if job.finished_at is not None]
        if not ended:
            return 0
        collection, counters, attempts = self._collection(), self._counts(), self._attempts
        batch = [job for job, _ in ended]
        deletes = [
            DeleteOne(
                {
                    "_id": ObjectId(job.id),
                    FIELDS["status"]: job.status.value,
                    FIELDS["finished_at"]: {"$lte": utc(finished)},
                }
            )
            for job, finished in ended
        ]

        def op() -> int:
            deleted = collection.bulk_write(deletes, ordered=False).deleted_count
            gone = batch if deleted == len(batch) else _gone(collection, batch)
            if gone and attempts is not None:
                attempts.bulk_write([DeleteMany({"jobId": job.id}) for job in gone], ordered=False)
            counts.write(counters, counts.added(gone, -1))
            return len(gone)

        return await self._call(op, "delete_jobs")

    async def set_retention(self, override: Override) -> None:
        retention = self._retention()
        _id = json.dumps([override.scope.value, override.name], ensure_ascii=False)
        doc = {
            "scope": override.scope.value,
            "name": override.name,
            "keep": {status.value: seconds for status, seconds in override.keep.items()},
            "updatedAt": utc(override.updated_at),
        }

        def op() -> None:
            if override.keep:
                retention.replace_one({"_id": _id}, doc, upsert=True)
            else:
                retention.delete_one({"_id": _id})

        await self._call(op, "set_retention")

    async def retention_overrides(self) -> list[Override]:
        retention = self._retention()

        def op() -> list[Override]:
            return [
                Override(
                    scope=Scope(d["scope"]),
                    name=d["name"],
                    keep={Status(s): float(n) for s, n in d["keep"].items()},
                    updated_at=d["updatedAt"].astimezone(UTC),
                )
                for d in retention.find({})
            ]

        found = await self._call(op, "retention_overrides", read=True)
        return sorted(found, key=lambda o: (o.scope.value, o.name))

    async def record_prune(self, summary: PruneSummary) -> None:
        sweeps = self._counts().database.get_collection(PRUNE_COLLECTION)
        doc = summary.to_json()
        await self._call(
            lambda: sweeps.replace_one({"_id": "last"}, doc, upsert=True), "record_prune"
        )

    async def last_prune(self) -> PruneSummary | None:
        sweeps = self._counts().database.get_collection(PRUNE_COLLECTION)
        doc = await self._call(lambda: sweeps.find_one({"_id": "last"}), "last_prune", read=True)
        return None if doc is None else PruneSummary.from_json(doc)

    async def forget_ends(self, before: datetime) -> int:
        collection, step = self._ends(), step_of(before)
        return await self._call(lambda: ends.forget(collection, step), "forget_ends")


@attrs.define
class _Pace:
    """The size of a prune's next slice, and the pause after one: a slice that took less
    than PRUNE_SLICE_SECONDS grows the next (at most twice as large), one that took more
    shrinks it; the pause is as long as the slice took, so a prune holds a busy server at
    most half the time and its slices grow slower as the server's other writes slow them."""

    size: int = PRUNE_SLICE_FIRST
    took: float = 0.0

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        """Time a slice and size the next by it."""
        started = trio.current_time()
        yield
        self.took = trio.current_time() - started
        low, high = PRUNE_SLICE_BOUNDS
        scale = min(2.0, PRUNE_SLICE_SECONDS / max(self.took, 1e-3))
        self.size = max(low, min(high, int(self.size * scale)))

    async def rest(self) -> None:
        """Pause as long as the last slice took."""
        await trio.sleep(self.took)


def _gone(collection: Collection[Document], jobs: list[Job]) -> list[Job]:
    """Which of ``jobs`` are no longer stored: one read by id each (see ``_delete_slice``)."""
    return [
        job for job in jobs if collection.find_one({"_id": ObjectId(job.id)}, {"_id": True}) is None
    ]


__all__ = ["PRUNE_INDEX", "MongoUpkeepMixin", "prepare_upkeep"]
