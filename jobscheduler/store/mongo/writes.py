"""The MongoDB store's conditional writes: claims, transitions, and their batches.

Every transition is a conditional update whose filter is ``_id`` plus the Change's
expectations; nothing here needs a multi-document transaction.

- :meth:`MongoWrites.apply` is one ``findAndModify`` (the job comes back in its reply).
- :meth:`MongoWrites.apply_many` sends a batch as multi-statement ``update`` commands (one
  conditional statement per job, chunked for FerretDB; :mod:`.batch`) and reads the
  jobs back by the batch's mark: two commands for a batch instead of one per job. Batches of
  one or two statements go as ``findAndModify`` each, which is no more commands.
- :meth:`MongoWrites.claim_due` reads the due candidates' ids in claim order, moves them in
  one ``update_many`` whose filter repeats the due condition (a candidate another claimer
  took first is skipped), and reads back the ones carrying its mark: three commands for a
  batch of up to ``limit`` jobs, and each job handed out to exactly one claimer. On FerretDB
  (``claim_each``) the move is one conditional statement per candidate instead, chunked as
  batches are: FerretDB's ``update_many`` decodes every due job to find the candidates.

Unknown outcomes (a network error during a write): :meth:`apply` re-reads the job and
sends the update once more unless the document holds what it would have written; a batch
reads back what carries its mark and sends the statements of the uncertain chunk that did
not land once more (same mark, still conditional, so none applies twice); a claim just
reads back its mark, so a claim whose reply was lost neither loses nor doubles a job.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

import attrs
from bson import ObjectId
from pymongo import ReturnDocument, UpdateOne
from pymongo.collection import Collection
from pymongo.errors import PyMongoError

from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import Change, claim_fields
from jobscheduler.store.query import DUE_ONE_OFF

from . import counts, ends
from .attempts import write_records
from .batch import (
    BATCH_FIELD,
    CLAIM_FIELD,
    Unit,
    chunks,
    distinct_jobs,
    marked,
    new_mark,
    plan,
    statement_size,
    unit_results,
)
from .codec import (
    CLAIM_SORT,
    Document,
    change_filter,
    document_to_job,
    holds,
    job_filter,
    resend_filter,
    set_document,
    update_document,
)
from .conn import MongoConnection, outcome_unknown
from .notifications import write_events
from .query import ManageQueries, manage_queries

log = logging.getLogger(__name__)

#: Batches of fewer statements go as one ``findAndModify`` each (no more commands).
MIN_BULK: int = 3
#: Times a narrowed change that missed is narrowed and tried again (``_renarrow_sync``).
NARROW_RETRIES: int = 3


class MongoWrites(MongoConnection):
    """Claims and transitions (abstract: the reads live in the subclass)."""

    # ------------------------------------------------------------------ claims

    async def claim_due(self, now: datetime, limit: int) -> list[Job]:
        """Claim up to ``limit`` due jobs in one thread hop and three commands (see the
        module docstring). The jobs come back in claim order. If the read-back fails after
        the update, the jobs it moved stay queued for the reaper (StoreError)."""
        if limit <= 0:
            return []
        jobs = self._collection()
        query = job_filter(DUE_ONE_OFF.due(now))
        claim_set = set_document(claim_fields(now))

        def claim() -> list[Job]:
            candidates = [
                doc["_id"]
                for doc in jobs.find(query, projection={"_id": True}, sort=CLAIM_SORT, limit=limit)
            ]
            if not candidates:
                return []
            mark = new_mark()
            update = {"$set": {**claim_set, CLAIM_FIELD: mark}}
            try:
                if self._claim_each:
                    statements = [({**query, "_id": _id}, update) for _id in candidates]
                    for chunk in chunks([statement_size(q, u) for q, u in statements]):
                        jobs.bulk_write([UpdateOne(*statements[i]) for i in chunk], ordered=False)
                else:
                    jobs.update_many({**query, "_id": {"$in": candidates}}, update)
            except PyMongoError as exc:
                if not outcome_unknown(exc):
                    raise
                # Whatever landed carries the mark; what did not stays due for the next claim.
                log.warning("claim outcome unknown, reading back: %s", exc)
            claimed = [
                document_to_job(doc)
                for doc in self._read_marked(
                    jobs, candidates, mark, field=CLAIM_FIELD, sort=True
                ).values()
            ]
            moved = counts.merge(
                counts.added((attrs.evolve(job, status=Status.PENDING) for job in claimed), -1),
                counts.added(claimed),
            )
            counts.write(self._counts(), moved)
            return claimed

        async with self._conditional_write():
            return await self._call(claim, "claim")

    def _read_marked(
        self,
        jobs: Collection[Document],
        ids: Sequence[ObjectId],
        mark: str,
        *,
        field: str = BATCH_FIELD,
        sort: bool = False,
    ) -> dict[ObjectId, Document]:
        """The documents among ``ids`` whose ``field`` holds ``mark`` (read again once after a
        network error: a read has no effect), by id; in claim order when ``sort``."""
        query = {"_id": {"$in": list(ids)}, field: mark}

        def read() -> dict[ObjectId, Document]:
            cursor = jobs.find(query, sort=CLAIM_SORT if sort else None)
            return {doc["_id"]: doc for doc in cursor}

        try:
            return read()
        except PyMongoError as exc:
            if not outcome_unknown(exc):
                raise
            log.warning("read-back of a batch failed, reading again: %s", exc)
        return read()

    # ------------------------------------------------------------------ one change

    def _apply_sync(self, change: Change) -> Job | None:
        """One conditional ``findAndModify`` (runs in a worker thread); see module doc."""
        jobs = self._collection()
        query = change_filter(change)
        values = set_document(change.set)
        update = update_document(change)

        def attempt(query: Document) -> Job | None:
            doc = jobs.find_one_and_update(query, update, return_document=ReturnDocument.AFTER)
            return None if doc is None else document_to_job(doc)

        try:
            return attempt(query)
        except PyMongoError as exc:
            if not outcome_unknown(exc):
                raise
            log.warning(
                "%s outcome unknown job_id=%s, re-reading: %s",
                change.transition,
                change.job_id,
                exc,
            )
        current = jobs.find_one({"_id": query["_id"]})
        if current is not None and holds(current, values):
            return document_to_job(current)
        return attempt(resend_filter(change))

    def _record_sync(self, changes: Sequence[Change], results: Sequence[Job | bool | None]) -> None:
        if self._attempts is not None:
            write_records(self._attempts, changes, results)
        write_events(self._client, self._database, changes, results)

    def _count_sync(self, changes: Sequence[Change], results: Sequence[Job | bool | None]) -> None:
        counts.write(self._counts(), counts.moved(changes, results))
        ends.write(self._ends(), ends.reached(changes, results))

    def _renarrow_sync(
        self, changes: Sequence[Change], narrowed: list[Change], results: list[Job | None]
    ) -> None:
        """A change that allows several statuses was narrowed to the one its job held
        (:func:`.counts.narrow`); if the job moved to another of them before the update (a
        cancel while the scheduler claims), the narrowed change missed where the change
        itself would have applied. Such changes are narrowed again and applied one at a
        time, up to NARROW_RETRIES times, so narrowing never turns a win into a lost race.
        ``narrowed`` and ``results`` are updated in place."""
        jobs = self._collection()
        for _ in range(NARROW_RETRIES):
            missed = [
                i
                for i, change in enumerate(changes)
                if results[i] is None and narrowed[i] is not change
            ]
            if not missed:
                return
            again = counts.narrow(jobs, [changes[i] for i in missed])
            for i, change in zip(missed, again, strict=True):
                narrowed[i] = change
                if change is not changes[i]:  # else: in none of its statuses, a real miss
                    results[i] = self._apply_sync(change)

    async def apply(self, change: Change) -> Job | None:
        def op() -> Job | None:
            narrowed = counts.narrow(self._collection(), [change])
            results = [self._apply_sync(narrowed[0])]
            self._renarrow_sync([change], narrowed, results)
            self._record_sync(narrowed, results)
            self._count_sync(narrowed, results)
            return results[0]

        async with self._conditional_write():
            return await self._call(op, change.transition)

    # ------------------------------------------------------------------ batches

    async def apply_many(self, changes: Sequence[Change]) -> list[Job | None]:
        """Apply the changes in a single thread hop (not a transaction), results in order.

        Two consecutive changes of one job that chain (an executor's pick then start) go as
        one statement: the same outcome as applying them in turn with nothing in between. If
        that statement matches nothing, the second change is still tried alone, as it would
        have been. Batches of at least MIN_BULK statements, each of another job, go as
        chunked multi-statement updates plus one read-back (module docstring); others as one
        ``findAndModify`` per statement.
        """
        if not changes:
            return []

        def apply_all() -> list[Job | None]:
            narrowed = counts.narrow(self._collection(), changes)
            units = plan(narrowed)
            if len(units) >= MIN_BULK and distinct_jobs(units):
                afters = self._bulk_sync([unit.change for unit in units])
            else:
                afters = [self._apply_sync(unit.change) for unit in units]
            results: list[Job | None] = []
            retry: list[tuple[int, Change]] = []
            for unit, after in zip(units, afters, strict=True):
                results += unit_results(unit, after)
                if unit.second is not None and after is None:
                    retry.append((len(results), unit.second))
                    results.append(None)
            if retry:
                seconds = [change for _, change in retry]
                again = (
                    self._bulk_sync(seconds)
                    if len(seconds) >= MIN_BULK and distinct_jobs(plan(seconds))
                    else [self._apply_sync(change) for change in seconds]
                )
                for (index, _), after in zip(retry, again, strict=True):
                    results[index] = after
            self._renarrow_sync(changes, narrowed, results)
            self._record_sync(narrowed, results)
            self._count_sync(narrowed, results)
            return results

        async with self._conditional_write():
            return await self._call(apply_all, "apply_many")

    def _bulk_sync(self, changes: Sequence[Change]) -> list[Job | None]:
        """Apply changes of distinct jobs as chunked unordered multi-statement updates, each
        statement marking its document; the job after each change, or None where it did
        not apply (runs in a worker thread)."""
        return self._bulk_sync_counted(changes)[0]

    def _bulk_sync_counted(self, changes: Sequence[Change]) -> tuple[list[Job | None], int | None]:
        """:meth:`_bulk_sync`, and how many statements the server said matched (None when a
        chunk's outcome was unknown). A change whose job moved on before the read-back (a
        later batch re-marked it) reads as None although it matched."""
        jobs = self._collection()
        mark = new_mark()
        ids = [ObjectId(change.job_id) for change in changes]
        statements = [(change_filter(c), marked(update_document(c), mark)) for c in changes]
        matched: int | None = 0
        uncertain: list[int] = []
        for chunk in chunks([statement_size(q, u) for q, u in statements]):
            try:
                reply = jobs.bulk_write([UpdateOne(*statements[i]) for i in chunk], ordered=False)
            except PyMongoError as exc:
                if not outcome_unknown(exc):
                    raise
                log.warning(
                    "batch outcome unknown, reading back",
                    extra={"statements": len(chunk), "error": str(exc)},
                )
                uncertain.extend(chunk)
                continue
            if matched is not None:
                matched += reply.matched_count
        found = self._read_marked(jobs, ids, mark)
        if uncertain:
            # Those that did not land are sent once more: still conditional and marked, so
            # one that did land after all cannot apply twice.
            resend = [i for i in uncertain if ids[i] not in found]
            again = [(resend_filter(changes[i]), statements[i][1]) for i in resend]
            for chunk in chunks([statement_size(*statement) for statement in again]):
                jobs.bulk_write([UpdateOne(*again[i]) for i in chunk], ordered=False)
            if resend:
                found = self._read_marked(jobs, ids, mark)
            matched = None
        if matched is not None and len(found) < matched:
            # A later batch re-marked a document this one changed meanwhile: judge those
            # by whether they still hold what their change wrote.
            missing = [i for i, _id in enumerate(ids) if _id not in found]
            current = {
                doc["_id"]: doc for doc in jobs.find({"_id": {"$in": [ids[i] for i in missing]}})
            }
            for i in missing:
                doc = current.get(ids[i])
                if doc is not None and holds(doc, set_document(changes[i].set)):
                    found[ids[i]] = doc
        after = [None if (doc := found.get(_id)) is None else document_to_job(doc) for _id in ids]
        return after, matched

    # ------------------------------------------------------------------ management

    def _manage(self) -> ManageQueries:
        return manage_queries(self._collection())

    async def apply_bulk(self, changes: Sequence[Change]) -> int:
        """Independent conditional updates in one thread hop, nothing read back: as chunked
        multi-statement updates whose matched counts add up to the answer; one update each
        when a change carries an attempt record (which needs to know which applied)."""
        if not changes:
            return 0
        manage = self._manage()
        jobs = self._collection()

        def op() -> int:
            if any("status" in change.set for change in changes):
                # What moved is counted, so which changes applied must be known: the
                # batch's read-back (a job named twice: one change at a time).
                narrowed = counts.narrow(jobs, changes)
                bulk_matched: int | None = None
                if len(narrowed) >= MIN_BULK and distinct_jobs(plan(narrowed)):
                    results, bulk_matched = self._bulk_sync_counted(narrowed)
                else:
                    results = [self._apply_sync(change) for change in narrowed]
                self._renarrow_sync(changes, narrowed, results)
                outcomes: list[Job | bool | None] = list(results)
                if bulk_matched == len(narrowed):
                    # Every statement matched: one read back as None had moved on already
                    # (executors run retried jobs at once), not missed.
                    for i, result in enumerate(results):
                        if result is None:
                            outcomes[i] = True
                self._record_sync(narrowed, outcomes)
                self._count_sync(narrowed, outcomes)
                return sum(result is not None for result in outcomes)
            if any(change.record is not None for change in changes):
                applied = manage.apply_bulk(changes)
                self._record_sync(changes, applied)
                return sum(applied)
            statements = [(change_filter(c), update_document(c)) for c in changes]
            matched = 0
            for chunk in chunks([statement_size(q, u) for q, u in statements]):
                reply = jobs.bulk_write([UpdateOne(*statements[i]) for i in chunk], ordered=False)
                matched += reply.matched_count
            return matched

        async with self._conditional_write():
            return await self._call(op, "apply_bulk")


__all__ = ["MIN_BULK", "MongoWrites", "Unit"]
