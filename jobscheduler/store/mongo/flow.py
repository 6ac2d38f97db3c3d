"""The Mongo store's flow control: fair candidates, slot claims fenced by the sparse unique
``keySlot`` / ``typeSlot`` indexes, rate buckets (``flowBuckets``), limits (``flowLimits``),
weights (``flowWeights``) and the leader's report (``flowReport``).

A claim sends one conditional statement per pick (still due, pending, no cron) that also
sets the pick's slots: a statement whose slot another job holds fails on the unique index
(duplicate key) and claims nothing, the others go on (unordered). Then the jobs claimed
are read back by the claim's mark, as :meth:`~.writes.MongoWrites.claim_due` does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from pymongo import ASCENDING, DESCENDING, IndexModel, MongoClient, UpdateOne
from pymongo.collection import Collection
from pymongo.errors import DuplicateKeyError, OperationFailure, PyMongoError

from jobscheduler.domain.flow import FlowReport, LimitOverride, Limits, TenantWeight
from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.states import claim_fields
from jobscheduler.errors import StoreError
from jobscheduler.store.query import DUE_ONE_OFF, Candidate, Exclusions, Pick

from .batch import CLAIM_FIELD, chunks, new_mark, statement_size
from .codec import FIELDS, Document, document_to_job, job_filter, set_document, stored_time, to_doc
from .seam import MongoSeam

BUCKETS: Final = "flowBuckets"
LIMITS: Final = "flowLimits"
WEIGHTS: Final = "flowWeights"
REPORT: Final = "flowReport"

#: On the jobs collection: the slots (sparse: a job holding none is not in them) and the
#: fair claim's walk (level, tenant, fairness key, due time).
FLOW_INDEXES: Final = [
    IndexModel([(FIELDS["key_slot"], ASCENDING)], name="keySlot_unique", unique=True, sparse=True),
    IndexModel(
        [(FIELDS["type_slot"], ASCENDING)], name="typeSlot_unique", unique=True, sparse=True
    ),
    IndexModel(
        [
            (FIELDS["status"], ASCENDING),
            (FIELDS["priority"], DESCENDING),
            (FIELDS["tenant_id"], ASCENDING),
            (FIELDS["fairness_key"], ASCENDING),
            (FIELDS["scheduled_at"], ASCENDING),
            ("_id", ASCENDING),
        ],
        name="fair",
    ),
]
_DUPLICATE_KEY: Final = 11000


def _slot_taken(exc: PyMongoError) -> bool:
    """A write refused by a slot's unique index: MongoDB's duplicate key, or FerretDB's
    SQLite constraint error (an InternalError naming the index)."""
    if isinstance(exc, DuplicateKeyError):
        return True
    return isinstance(exc, OperationFailure) and (
        exc.code == _DUPLICATE_KEY or "UNIQUE constraint failed" in str(exc)
    )


def prepare_flow(jobs: Collection[Document]) -> None:
    """Create the flow indexes (one per command) and give jobs stored before fairness keys
    existed the default group, so the fair claim's equality on it finds them."""
    for index in FLOW_INDEXES:
        jobs.create_indexes([index])
    jobs.update_many(
        {FIELDS["fairness_key"]: {"$exists": False}}, {"$set": {FIELDS["fairness_key"]: ""}}
    )


def distinct_values(jobs: Collection[Document], field: str, within: Document) -> list[Any]:
    """The distinct values of ``field`` among the jobs matching ``within``, in order: one
    ``find_one`` sorted on ``field`` per value, each past the one before. (``distinct`` reads
    and decodes every matching document on FerretDB; a backlog of thousands made each claim
    take seconds.) A missing or null value comes first, then the strings."""
    found: list[Any] = []
    while True:
        query = dict(within)
        if found:
            last = found[-1]
            query[field] = {"$gte": ""} if last is None else {"$gt": last}
        doc = jobs.find_one(query, sort=[(field, ASCENDING)], projection={field: True})
        if doc is None:
            return found
        value = doc.get(field)
        if found and value == found[-1]:
            return found
        found.append(value)


class MongoFlowMixin(MongoSeam):
    """Flow control in the store's database."""

    def _flow(self, name: str) -> Collection[Document]:
        client: MongoClient[Document] | None = self._client
        if client is None:
            raise StoreError("MongoDB store is not started")
        return client.get_database(self._database).get_collection(name)

    async def fair_candidates(
        self, now: datetime, per_group: int, exclude: Exclusions | None = None
    ) -> list[Candidate]:
        jobs = self._collection()
        due = job_filter(DUE_ONE_OFF.due(now))
        exclude = exclude or Exclusions()
        f = FIELDS

        def level_after(level: int | None) -> int | None:
            query = due if level is None else {**due, f["priority"]: {"$lt": level}}
            found = list(
                jobs.find(query, {f["priority"]: True}, sort=[(f["priority"], DESCENDING)], limit=1)
            )
            return None if not found else int(found[0][f["priority"]])

        def group_query(level: int, tenant: str, fairness: str) -> Document:
            query: Document = {
                **due,
                f["priority"]: level,
                f["tenant_id"]: tenant,
                f["fairness_key"]: fairness,
            }
            types, keys = exclude.of_tenant(tenant)
            if types:
                query[f["job_type"]] = {"$nin": types}
            if keys:
                query["$nor"] = [{f["job_type"]: t, f["concurrency_key"]: k} for t, k in keys]
            return query

        def op() -> list[Candidate]:
            out: list[Candidate] = []
            level = level_after(None)
            while level is not None and len(out) < per_group:
                at_level = {**due, f["priority"]: level}
                for tenant in distinct_values(jobs, f["tenant_id"], at_level):
                    mine = {**at_level, f["tenant_id"]: tenant}
                    for fairness in distinct_values(jobs, f["fairness_key"], mine):
                        cursor = jobs.find(
                            group_query(level, tenant, fairness),
                            sort=[(f["scheduled_at"], ASCENDING), ("_id", ASCENDING)],
                            limit=per_group,
                        )
                        out.extend(Candidate.of(document_to_job(doc)) for doc in cursor)
                level = level_after(level)
            return out

        return await self._call(op, "fair_candidates", read=True)

    async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
        if not picks:
            return []
        jobs = self._collection()
        due = job_filter(DUE_ONE_OFF.due(now))
        claim_set = set_document(claim_fields(now))
        mark = new_mark()
        statements: list[tuple[Document, Document]] = []
        for pick in picks:
            values = {**claim_set, CLAIM_FIELD: mark}
            if pick.start_at is not None:
                values.update(set_document(claim_fields(now, pick.start_at)))
            if pick.key_slot is not None:
                values[FIELDS["key_slot"]] = pick.key_slot
            if pick.type_slot is not None:
                values[FIELDS["type_slot"]] = pick.type_slot
            statements.append(({**due, "_id": to_doc("id", pick.job_id)}, {"$set": values}))

        def claim() -> list[Job]:
            free = [i for i, p in enumerate(picks) if p.key_slot is None and p.type_slot is None]
            # (A pick with a start instant only has its own $set: it goes with the others.)
            for chunk in chunks([statement_size(*statements[i]) for i in free]):
                jobs.bulk_write([UpdateOne(*statements[free[i]]) for i in chunk], ordered=False)
            # A statement taking a slot goes alone: a slot another job holds fails it on the
            # unique index, and FerretDB fails a whole multi-statement command for that.
            for i, pick in enumerate(picks):
                if pick.key_slot is not None or pick.type_slot is not None:
                    try:
                        jobs.update_one(*statements[i])
                    except PyMongoError as exc:
                        if not _slot_taken(exc):
                            raise
            ids = [q["_id"] for q, _ in statements]
            found = {
                str(doc["_id"]): document_to_job(doc)
                for doc in jobs.find({"_id": {"$in": ids}, CLAIM_FIELD: mark})
            }
            return [found[p.job_id] for p in picks if p.job_id in found]

        async with self._conditional_write():
            return await self._call(claim, "claim_picks")

    async def queued_by_type(self, now: datetime) -> dict[str, int]:
        jobs = self._collection()
        f = FIELDS
        pipeline: list[Document] = [
            {
                "$match": {
                    f["status"]: Status.QUEUED.value,
                    f["queued_at"]: {"$lte": to_doc("queued_at", now)},
                }
            },
            {"$group": {"_id": "$" + f["job_type"], "n": {"$sum": 1}}},
        ]

        def op() -> dict[str, int]:
            return {str(doc["_id"]): int(doc["n"]) for doc in jobs.aggregate(pipeline)}

        return await self._call(op, "queued_by_type", read=True)

    async def held_slots(self) -> list[str]:
        jobs = self._collection()
        f = FIELDS

        def op() -> list[str]:
            held: list[str] = []
            for field in (f["key_slot"], f["type_slot"]):
                for doc in jobs.find({field: {"$gt": ""}}, {field: True, "_id": False}):
                    held.append(str(doc[field]))
            return held

        return await self._call(op, "held_slots", read=True)

    async def buckets(self, scopes: Sequence[str]) -> dict[str, datetime]:
        if not scopes:
            return {}
        buckets = self._flow(BUCKETS)

        def op() -> dict[str, datetime]:
            found = buckets.find({"_id": {"$in": list(scopes)}})
            return {str(doc["_id"]): stored_time(doc["tat"]) for doc in found}

        return await self._call(op, "buckets", read=True)

    async def put_bucket(self, scope: str, expect: datetime | None, tat: datetime) -> bool:
        buckets = self._flow(BUCKETS)

        def op() -> bool:
            if expect is None:
                try:
                    buckets.insert_one({"_id": scope, "tat": utc(tat)})
                except DuplicateKeyError:
                    return False
                return True
            result = buckets.update_one(
                {"_id": scope, "tat": utc(expect)}, {"$set": {"tat": utc(tat)}}
            )
            return result.matched_count == 1

        return await self._call(op, "put_bucket")

    async def limit_overrides(self, tenant_id: str | None = None) -> list[LimitOverride]:
        limits = self._flow(LIMITS)
        query = {} if tenant_id is None else {"tenantId": tenant_id}

        def op() -> list[LimitOverride]:
            found = [
                LimitOverride(
                    tenant_id=str(doc["tenantId"]),
                    job_type=str(doc["jobType"]),
                    limits=Limits.from_json(doc["limits"]),
                )
                for doc in limits.find(query)
            ]
            return sorted(found, key=lambda o: (o.tenant_id, o.job_type))

        return await self._call(op, "limit_overrides", read=True)

    async def put_limit_override(self, override: LimitOverride) -> None:
        limits = self._flow(LIMITS)
        key = json.dumps([override.tenant_id, override.job_type])
        doc: Document = {
            "tenantId": override.tenant_id,
            "jobType": override.job_type,
            "limits": override.limits.to_json(),
        }

        def op() -> Any:
            if override.limits.empty:
                return limits.delete_one({"_id": key})
            return limits.replace_one({"_id": key}, doc, upsert=True)

        await self._call(op, "put_limit_override")

    async def tenant_weights(self) -> list[TenantWeight]:
        weights = self._flow(WEIGHTS)

        def op() -> list[TenantWeight]:
            found = [
                TenantWeight(tenant_id=str(doc["_id"]), weight=int(doc["weight"]))
                for doc in weights.find({})
            ]
            return sorted(found, key=lambda w: w.tenant_id)

        return await self._call(op, "tenant_weights", read=True)

    async def put_tenant_weight(self, weight: TenantWeight) -> None:
        weights = self._flow(WEIGHTS)

        def op() -> Any:
            if weight.weight == 1:
                return weights.delete_one({"_id": weight.tenant_id})
            return weights.replace_one(
                {"_id": weight.tenant_id}, {"weight": weight.weight}, upsert=True
            )

        await self._call(op, "put_tenant_weight")

    async def put_flow_report(self, report: FlowReport) -> None:
        reports = self._flow(REPORT)
        text = json.dumps(report.to_json())
        await self._call(
            lambda: reports.replace_one({"_id": "leader"}, {"report": text}, upsert=True),
            "put_flow_report",
        )

    async def flow_report(self) -> FlowReport | None:
        reports = self._flow(REPORT)

        def op() -> FlowReport | None:
            doc = reports.find_one({"_id": "leader"})
            return None if doc is None else FlowReport.from_json(json.loads(doc["report"]))

        return await self._call(op, "flow_report", read=True)
