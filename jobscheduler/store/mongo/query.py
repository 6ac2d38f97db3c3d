"""The Mongo store's management queries: job filters with keyset pages, bulk updates, stats,
and :class:`MongoQueryMixin`, the mixin of :class:`~jobscheduler.store.mongo.store.MongoJobStore`
that runs them.

Every filter is equalities and ranges on top-level fields (no ``$or``), the form that servers
pushing filters down to their indexes (the test stack's patched FerretDB) serve best. A page
after a cursor is therefore two queries: the jobs of the cursor's own ``createdAt`` (those
with smaller ids are kept), then older ``createdAt`` values.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import attrs
from pymongo import ASCENDING, DESCENDING, IndexModel
from pymongo.collection import Collection

from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.states import Change
from jobscheduler.store.ends import stats_first_step, windows_of
from jobscheduler.store.query import (
    DUE_ONE_OFF,
    Cursor,
    JobCounts,
    JobQuery,
    JobStats,
    Sort,
    Statuses,
    counts_from,
)

from . import counts, ends
from .codec import (
    FIELDS,
    Document,
    change_filter,
    document_to_job,
    job_filter,
    to_doc,
    update_document,
)
from .seam import MongoSeam

#: The index of releases whose Overview counted the jobs finished per minute (counters
#: of ended jobs serve it now): read by nothing, written by every transition.
STATUS_UPDATED_INDEX: Final = "status_updatedAt"

#: Indexes of the management queries (document field names; see ``mongo.FIELDS``).
MANAGE_INDEXES: Final = [
    IndexModel(
        [("tenantId", ASCENDING), ("jobType", ASCENDING), ("createdAt", DESCENDING)],
        name="tenant_jobType_createdAt",
    ),
    IndexModel([("templateId", ASCENDING), ("createdAt", DESCENDING)], name="templateId_createdAt"),
    IndexModel([("status", ASCENDING), ("createdAt", DESCENDING)], name="status_createdAt"),
    # A tenant's cron templates (the Cron view: ``cron`` not null), newest first.
    IndexModel(
        [("tenantId", ASCENDING), ("cron", ASCENDING), ("createdAt", DESCENDING)],
        name="tenant_cron_createdAt",
    ),
    # Listings sorted by due time (either direction walks the same index).
    IndexModel(
        [("tenantId", ASCENDING), ("scheduledAt", ASCENDING), ("_id", ASCENDING)],
        name="tenant_scheduledAt",
    ),
    IndexModel(
        [
            ("tenantId", ASCENDING),
            ("status", ASCENDING),
            ("scheduledAt", ASCENDING),
            ("_id", ASCENDING),
        ],
        name="tenant_status_scheduledAt",
    ),
    # Listings across tenants (an all-tenant admin's dashboard): newest jobs, templates.
    IndexModel([("createdAt", DESCENDING), ("_id", DESCENDING)], name="createdAt"),
    IndexModel([("cron", ASCENDING), ("createdAt", DESCENDING)], name="cron_createdAt"),
]


@attrs.define(eq=False)
class ManageQueries:
    """Blocking queries on the ``jobs`` collection (run in the store's worker threads)."""

    _jobs: Collection[Document]
    _fields: Mapping[str, str]
    _decode: Callable[[Mapping[str, Any]], Job]
    _change_filter: Callable[[Change], Document]
    _to_doc: Callable[[str, Any], Any]
    _update_document: Callable[[Change], Document]

    def _order(self, sort: Sort) -> list[tuple[str, int]]:
        direction = DESCENDING if sort.descending else ASCENDING
        return [(self._fields[sort.field], direction), ("_id", direction)]

    def find(self, query: JobQuery, limit: int, after: Cursor | None) -> list[Job]:
        if len(query.statuses) > 1:
            # One query per status, merged: the test stack's FerretDB serves ``status: {$in:
            # [...]}`` beside a sort by decoding every document of the tenant (13 s for a
            # page of two statuses at 20,000 jobs, measured), an equality from its index
            # (0.15 s). Each part holds the first ``limit`` of its status after the cursor,
            # so the merge's first ``limit`` are the page.
            parts = [
                self._find(attrs.evolve(query, statuses=(status,)), limit, after)
                for status in query.statuses
            ]
            sort = query.sort
            merged = sorted(
                itertools.chain.from_iterable(parts),
                key=lambda job: (sort.key(job), job.id),
                reverse=sort.descending,
            )
            return merged[:limit]
        return self._find(query, limit, after)

    def _find(self, query: JobQuery, limit: int, after: Cursor | None) -> list[Job]:
        base = job_filter(query)
        sort = query.sort
        order = self._order(sort)
        if after is None:
            return [self._decode(d) for d in self._jobs.find(base, sort=order, limit=limit)]
        field = self._fields[sort.field]
        at = utc(after.at)
        bounds: Document = dict(base.get(field) or {})
        jobs: list[Job] = []
        if self._within(bounds, at):
            # The cursor's own millisecond: its jobs past the cursor's id. Written as a range
            # and with the id condition applied here: FerretDB evaluates an equality on a
            # date, or a range on ``_id`` beside other conditions, by decoding the whole
            # collection (2.8-4.4 s at 10,000 jobs, measured; the range form: 0.7 s). Jobs
            # sharing one millisecond are few, so reading them all costs little.
            oid = self._to_doc("id", after.id)
            same_ms = {"$gte": at, "$lte": at}
            ties = self._jobs.find({**base, field: same_ms}, sort=order)
            jobs = [
                self._decode(d)
                for d in ties
                if (d["_id"] < oid if sort.descending else d["_id"] > oid)
            ][:limit]
        if len(jobs) < limit:
            if sort.descending:
                beyond = {**bounds, "$lt": min(at, bounds.get("$lt", at))}
            else:
                beyond = {**bounds, "$gt": at}
            more = self._jobs.find({**base, field: beyond}, sort=order, limit=limit - len(jobs))
            jobs += [self._decode(d) for d in more]
        return jobs

    @staticmethod
    def _within(bounds: Document | None, at: datetime) -> bool:
        """Whether ``at`` satisfies the query's own createdAt range."""
        if not bounds:
            return True
        return ("$gte" not in bounds or at >= bounds["$gte"]) and (
            "$lt" not in bounds or at < bounds["$lt"]
        )

    def apply_bulk(self, changes: Sequence[Change]) -> list[bool]:
        """One conditional ``update`` per change (its ``$set`` and ``$inc``), all in this
        thread hop; whether each matched (the caller appends the attempt records of those).
        For small batches: larger ones go as chunked multi-statement updates
        (:mod:`.batch`)."""
        applied: list[bool] = []
        for change in changes:
            update = self._update_document(change)
            result = self._jobs.update_one(self._change_filter(change), update)
            applied.append(result.matched_count > 0)
        return applied


def count_command(jobs: Collection[Document], query: Document) -> int:
    """How many documents of ``jobs`` match ``query`` (blocking): the ``count`` command, which
    MongoDB answers with a COUNT_SCAN of an index and the test stack's patched FerretDB with
    one SQL ``COUNT(*)`` (``count_documents`` is an aggregation, which FerretDB runs by
    decoding every matching document)."""
    return int(jobs.database.command("count", jobs.name, query=query)["n"])


def count(
    jobs: Collection[Document],
    tenant_id: str | None,
    statuses: Statuses,
    by_type: bool,
) -> JobCounts:
    """The store's one count (:meth:`~jobscheduler.store.base.JobStore.count_jobs`, blocking).

    By status: one ``count`` command per status on ``{tenantId, status}``, each answered from
    an index (``tenant_status_createdAt``, ``status_createdAt``), never a ``$group`` over
    every job. By type: one ``$group`` of the jobs counted, which reads them.
    """
    if not by_type:
        found = {
            Status(status): count_command(
                jobs, job_filter(JobQuery(tenant_id=tenant_id, statuses=(Status(status),)))
            )
            for status in (Status if statuses is None else statuses)
        }
        return JobCounts.of_statuses(statuses, found)
    match = job_filter(JobQuery(tenant_id=tenant_id, statuses=tuple(statuses or ())))
    pipeline: list[Document] = [
        *([{"$match": match}] if match else []),
        {"$group": {"_id": {"s": "$status", "t": "$jobType"}, "n": {"$sum": 1}}},
    ]
    found_types = {
        (Status(row["_id"]["s"]), str(row["_id"]["t"])): int(row["n"])
        for row in jobs.aggregate(pipeline)
    }
    return JobCounts.of_types(statuses, found_types)


def oldest_due(jobs: Collection[Document], tenant_id: str | None, now: datetime) -> datetime | None:
    """The ``scheduledAt`` of the oldest due one-off job of ``tenant_id`` (None: of every
    tenant) at ``now``, or None (blocking; the ``claim`` index)."""
    field = FIELDS["scheduled_at"]
    due = job_filter(DUE_ONE_OFF.of_tenant(tenant_id).due(now))
    for doc in jobs.find(due, projection={field: True}, sort=[(field, ASCENDING)], limit=1):
        found: datetime = doc[field]
        return found.astimezone(UTC)
    return None


def manage_queries(jobs: Collection[Document]) -> ManageQueries:
    """The management queries on ``jobs`` with this store's document codec."""
    return ManageQueries(jobs, FIELDS, document_to_job, change_filter, to_doc, update_document)


class MongoQueryMixin(MongoSeam):
    """Counts, filtered listing and statistics of the jobs collection."""

    async def count_jobs(
        self, tenant_id: str | None, statuses: Statuses = None, *, by_type: bool = False
    ) -> JobCounts:
        """From the counters (:mod:`.counts`); :func:`count` is the recount from the jobs."""
        counters = self._counts()
        found = await self._call(
            lambda: counts.read(counters, statuses, tenant_id), "count_jobs", read=True
        )
        return counts_from(found, tenant_id, statuses, by_type)

    async def tenants(self, limit: int) -> list[str]:
        jobs = self._collection()

        def op() -> list[str]:
            # A skip scan of an index leading with tenantId: one sorted find_one per tenant.
            # (``distinct`` reads every document on FerretDB: 600 ms at 20,000 jobs, against
            # 7 ms for five tenants this way.)
            found: list[str] = []
            while len(found) < limit:
                after = {"tenantId": {"$gt": found[-1]}} if found else {}
                doc = jobs.find_one(after, sort=[("tenantId", 1)], projection={"tenantId": 1})
                if doc is None:
                    break
                found.append(str(doc["tenantId"]))
            return found

        return await self._call(op, "tenants", read=True)

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        manage = manage_queries(self._collection())
        return await self._call(lambda: manage.find(query, limit, after), "find_jobs", read=True)

    async def stats(self, tenant_id: str | None, now: datetime) -> JobStats:
        jobs, counters, ended = self._collection(), self._counts(), self._ends()
        now = utc(now)

        def op() -> JobStats:
            found = counts_from(
                counts.read(counters, None, tenant_id), tenant_id, None, by_type=True
            )
            return JobStats(
                counts=found.by_type or {},
                oldest_due_at=oldest_due(jobs, tenant_id, now),
                windows=windows_of(ends.read(ended, tenant_id, stats_first_step(now)), now),
            )

        return await self._call(op, "stats", read=True)
