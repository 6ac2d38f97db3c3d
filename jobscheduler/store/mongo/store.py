"""The production JobStore: MongoDB through pymongo, every call in a trio worker thread.

One document per job in the ``jobs`` collection: ``_id`` is ``ObjectId(job.id)``, the other
fields use the camelCase names of the HTTP contract (:data:`FIELDS`), timestamps are BSON
dates (milliseconds, which is why :func:`jobscheduler.domain.model.utc` truncates to them) read back
timezone-aware UTC (:mod:`.codec`). Every transition is a conditional update whose
filter is ``_id`` plus the Change's expectations; batches of them (an executor's picks and
outcomes, the reaper's sweeps) go as chunked multi-statement updates read back by a batch
mark, and a claim moves its batch with one ``update_many`` that repeats the due filter, so
each job is handed out atomically without a multi-document transaction
(:mod:`.writes`, :mod:`.batch`).

The store is split along its seams: :mod:`.conn` (client, indexes, thread plumbing),
:mod:`.writes` (claims and transitions), this module (inserts and reads), beside
:mod:`.attempts`, :mod:`.ledger`, :mod:`.query` (listing and stats), :mod:`.tenancy`,
:mod:`.workers`, :mod:`.workflows`, and :mod:`.counts` / :mod:`.upkeep` (the counters, pruning).

Durability: writes use write concern ``{w: "majority", j: true}``, reads use read concern
``majority`` (the claim, reaper and API reads all go through the same collection handle),
and the client asks for retryable writes. pymongo uses retryable writes only where the
server supports them (replica sets, sharded clusters); on a standalone server it does not.

Unknown outcomes: a network error (``AutoReconnect``/``NetworkTimeout``/
``ConnectionFailure``) during a write means the server may or may not have applied it.
:meth:`MongoJobStore.apply` then re-reads the job: if the document now holds every value of
``change.set`` the write landed and the job is returned; otherwise the update is sent once
more (still conditional, so it cannot apply twice). :meth:`MongoJobStore.insert` retries
once; a duplicate-key error on that retry whose stored document has this job's ``_id`` and
key means the first attempt landed, and the job is returned. Batches and claims read back
what carries their mark (see :mod:`.writes`). Anything still failing is raised as
:class:`~jobscheduler.errors.StoreError`.

FerretDB v1.24 (the MongoDB wire-protocol server on SQLite that the tests use), as measured
against it and read in its source:

- it accepts ``writeConcern`` (even ``w: 3``) and ``readConcern`` (even ``linearizable``) and
  ignores them, as it ignores ``lsid``/``txnNumber``: it has one node and no replication, so
  the production settings above stay as they are and cost nothing there;
- it reports itself as a standalone server, so pymongo sends it no retryable writes; if it
  were started with ``--repl-set-name`` pymongo would, and FerretDB would execute a retried
  write twice, so in that one case the client is rebuilt with ``retryWrites=false``;
- it has no transactions (we use none) and rejects payload keys containing ``.`` or starting
  with ``$``, which MongoDB 5+ stores: that becomes a ValidationError here;
- stock FerretDB v1's ``findAndModify``/``update``/``delete`` are NOT atomic: they read and
  filter the documents, then overwrite the chosen ones by ``_id``, so two concurrent
  conditional updates of one document can both "succeed" (two claimers get the same job).
  It also filters in memory after reading the whole collection, except for a lone ``_id``
  equality, and even then its writes by ``_id`` miss its own ``_id`` index.
  ``scripts/deps.sh`` therefore builds FerretDB with ``scripts/ferretdb/*.patch``: those
  commands become atomic (one at a time), writes by ``_id`` use the index, filters of
  equalities, nulls and ranges on top-level fields (every query of this store but the
  reaper's ``$or``) are evaluated by SQLite, which then also sorts and limits, and the WAL
  is checkpointed outside the writes. Such a build reports a ``ferretdbVersion`` containing
  ``-jobscheduler``. Against a stock FerretDB this store runs its own conditional writes one
  at a time (``serialize_writes``), which keeps one process correct but not several.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from bson import ObjectId
from pymongo import ASCENDING
from pymongo.errors import BulkWriteError, DuplicateKeyError, PyMongoError, WriteError

from jobscheduler.domain.audit import AuditRecord
from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.states import release_step, settle_step
from jobscheduler.errors import StoreError, ValidationError
from jobscheduler.store.base import InsertOutcome
from jobscheduler.store.inserts import duplicate_of, first_of_each_key, spread_outcomes
from jobscheduler.store.jobs import found
from jobscheduler.store.query import DUE_TEMPLATE, PENDING, JobQuery

from .attempts import (
    ATTEMPT_INDEXES,
    MongoAttemptsMixin,
    attempt_to_document,
    document_to_attempt,
)
from .batch import BATCH_FIELD, CLAIM_FIELD
from .codec import (
    CLAIM_SORT,
    COLLECTION,
    FIELDS,
    RUN_FIELDS,
    STALE_FIELDS,
    Document,
    document_to_job,
    job_filter,
    job_to_document,
)
from .conn import ATOMIC_FERRETDB_MARK, INDEXES, INVALID_DOCUMENT_CODES, outcome_unknown
from .flow import MongoFlowMixin
from .ledger import MongoLedgerMixin
from .notifications import MongoNotificationsMixin
from .query import MongoQueryMixin
from .tenancy import MongoTenancyMixin
from .upkeep import MongoUpkeepMixin
from .workers import MongoWorkersMixin
from .workflows import MongoWorkflowsMixin
from .writes import MongoWrites

log = logging.getLogger(__name__)


class MongoJobStore(
    MongoWorkflowsMixin,
    MongoFlowMixin,
    MongoNotificationsMixin,
    MongoWorkersMixin,
    MongoQueryMixin,
    MongoTenancyMixin,
    MongoLedgerMixin,
    MongoAttemptsMixin,
    MongoUpkeepMixin,
    MongoWrites,
):
    """JobStore on a MongoDB (or MongoDB wire-protocol) server (settings: see
    :class:`~jobscheduler.store.mongo.conn.MongoConnection`)."""

    #: Each fairness group is a query of its own (see
    #: :class:`~jobscheduler.store.base.FlowControl`).
    fair_claims_indexed = False

    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        """Insert; DuplicateJob if the idempotencyKey is used (see module doc for retries).
        Then ``audit``, in the same call; a failure to write it is logged, the job stays."""
        jobs = self._collection()
        doc = job_to_document(job)

        def duplicate(exc: DuplicateKeyError, retried: bool) -> Job:
            if retried:
                stored = jobs.find_one({"_id": doc["_id"]})
                if stored is not None and stored.get(FIELDS["idempotency_key"]) == (
                    job.idempotency_key
                ):
                    return job  # the attempt whose reply was lost did land
            key_pattern = (exc.details or {}).get("keyPattern") or {}
            if key_pattern and not {FIELDS["idempotency_key"], FIELDS["template_id"]} & set(
                key_pattern
            ):
                raise StoreError(f"insert of job {job.id} failed: {exc}") from None
            # FerretDB names no index in its E11000 errors; _id collisions of fresh
            # ObjectIds do not happen, so an unnamed duplicate is the idempotency key.
            holder = jobs.find_one(
                {
                    FIELDS["tenant_id"]: job.tenant_id,
                    FIELDS["idempotency_key"]: job.idempotency_key,
                },
                projection={"_id": True},
            )
            raise duplicate_of(job, None if holder is None else str(holder["_id"])) from None

        def op() -> Job:
            stored = insert()
            self._count_inserted([stored])
            if audit is not None:
                try:
                    self._insert_audit(audit)
                except PyMongoError as exc:
                    if self._on_audit_failure is not None:
                        self._on_audit_failure()
                    log.error(
                        "audit record not written",
                        extra={
                            "action": audit.action,
                            "job_id": job.id,
                            "tenant": job.tenant_id,
                            "error": str(exc),
                        },
                    )
            return stored

        def insert() -> Job:
            try:
                jobs.insert_one(dict(doc))
            except DuplicateKeyError as exc:
                return duplicate(exc, retried=False)
            except WriteError as exc:
                if exc.code in INVALID_DOCUMENT_CODES:
                    message = (exc.details or {}).get("errmsg") or str(exc)
                    raise ValidationError(f"payload: rejected by the store: {message}") from None
                raise
            except PyMongoError as exc:
                if not outcome_unknown(exc):
                    raise
                log.warning("insert outcome unknown job_id=%s, retrying: %s", job.id, exc)
                try:
                    jobs.insert_one(dict(doc))
                except DuplicateKeyError as again:
                    return duplicate(again, retried=True)
            return job

        return await self._call(op, "insert")

    async def insert_many(self, jobs: Sequence[Job]) -> list[InsertOutcome]:
        """One unordered ``insert_many`` of the first job of each key; its per-document
        errors are mapped back to their index (duplicate keys to DuplicateJob, documents
        the server refuses to ValidationError), then one ``find`` names the holders of the
        taken keys. A network error (unknown outcome) sends the same documents once more:
        a duplicate whose holder has the job's own id then means the first send landed."""
        if not jobs:
            return []
        unique, later = first_of_each_key(jobs)
        collection = self._collection()
        docs = [job_to_document(job) for job in unique]

        def send() -> dict[int, Document]:
            """Insert; the write errors by index (empty when every document was stored)."""
            try:
                collection.insert_many([dict(doc) for doc in docs], ordered=False)
            except BulkWriteError as exc:
                return {int(e["index"]): e for e in exc.details.get("writeErrors", [])}
            return {}

        def op() -> list[InsertOutcome]:
            retried = False
            try:
                errors = send()
            except PyMongoError as exc:
                if not outcome_unknown(exc):
                    raise
                log.warning("insert_many outcome unknown (%d jobs), retrying: %s", len(docs), exc)
                errors, retried = send(), True
            taken = [i for i, e in errors.items() if e.get("code") == 11000]
            # Keys are unique per tenant: a taken key's holder is looked up in its tenant.
            holders: dict[tuple[str, str], str] = {}
            if taken:
                key_field, tenant_field = FIELDS["idempotency_key"], FIELDS["tenant_id"]
                keys = [unique[i].idempotency_key for i in taken]
                for doc in collection.find(
                    {key_field: {"$in": keys}},
                    projection={"_id": True, key_field: True, tenant_field: True},
                ):
                    holders[(doc[tenant_field], doc[key_field])] = str(doc["_id"])
            outcomes: list[InsertOutcome] = []
            for i, job in enumerate(unique):
                error = errors.get(i)
                if error is None:
                    outcomes.append(job)
                elif error.get("code") == 11000:
                    holder = holders.get((job.tenant_id, job.idempotency_key))
                    if retried and holder == job.id:
                        outcomes.append(job)  # the send whose reply was lost stored it
                    else:
                        outcomes.append(duplicate_of(job, holder))
                elif error.get("code") in INVALID_DOCUMENT_CODES:
                    message = error.get("errmsg") or "invalid document"
                    outcomes.append(ValidationError(f"payload: rejected by the store: {message}"))
                else:
                    raise StoreError(f"insert of job {job.id} failed: {error.get('errmsg')}")
            self._count_inserted(o for o in outcomes if isinstance(o, Job))
            return outcomes

        return spread_outcomes(jobs, await self._call(op, "insert_many"), later)

    async def get(self, job_id: str, *, tenant: str | None = None) -> Job:
        job = None
        if ObjectId.is_valid(job_id):
            job = await self._one({"_id": ObjectId(job_id)}, tenant, "get")
        return found(job, job_id)

    async def find_run(
        self, template_id: str, fire_at: datetime, *, tenant: str | None = None
    ) -> Job | None:
        query = {FIELDS["template_id"]: template_id, FIELDS["fire_at"]: utc(fire_at)}
        return await self._one(query, tenant, "find_run")

    async def _one(self, query: Document, tenant: str | None, what: str) -> Job | None:
        """The job matching ``query`` (and of ``tenant``, when given), or None."""
        jobs = self._collection()
        if tenant is not None:
            query = {**query, FIELDS["tenant_id"]: tenant}
        doc = await self._call(lambda: jobs.find_one(query), what, read=True)
        return None if doc is None else document_to_job(doc)

    async def clear_marks(self, steps: Sequence[Job]) -> int:
        return await self.apply_bulk([settle_step(step) for step in steps])

    async def release_spawned(self, spawner: str, now: datetime, limit: int) -> int:
        # One conditional statement per child (chunked: :meth:`apply_bulk`): the counters
        # follow the jobs' write per (tenant, job type) moved, which one ``update_many``
        # does not tell.
        waiting = JobQuery(tenant_id=None, spawned_by=spawner, statuses=(Status.WAITING,))
        children = await self.find_jobs(waiting, limit)
        return await self.apply_bulk([release_step(job, now=now) for job in children])

    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        jobs = self._collection()
        query = job_filter(DUE_TEMPLATE.due(now))
        sort = [(FIELDS["scheduled_at"], ASCENDING), ("_id", ASCENDING)]

        def op() -> list[Job]:
            return [document_to_job(d) for d in jobs.find(query, sort=sort, limit=limit)]

        return await self._call(op, "due_templates", read=True)

    async def next_due_at(self) -> datetime | None:
        jobs = self._collection()
        field = FIELDS["scheduled_at"]

        def op() -> datetime | None:
            cursor = jobs.find(
                job_filter(PENDING),
                projection={field: True},
                sort=[(field, ASCENDING)],
                limit=1,
            )
            for doc in cursor:
                value: datetime = doc[field]
                return value.astimezone(UTC)
            return None

        return await self._call(op, "next_due_at", read=True)

    async def find_stale(
        self, statuses: Sequence[Status], field: str, before: datetime, limit: int
    ) -> list[Job]:
        """A null or missing ``field`` counts as stale; oldest (nulls) first."""
        if field not in STALE_FIELDS:
            raise ValueError(f"find_stale: field must be one of {sorted(STALE_FIELDS)}")
        jobs = self._collection()
        doc_field = FIELDS[field]
        values = sorted({Status(s).value for s in statuses})
        query: Document = {
            # A lone status as a plain equality: servers that push filters down to their
            # indexes (the test stack's FerretDB) handle that form best.
            FIELDS["status"]: values[0] if len(values) == 1 else {"$in": values},
            "$or": [{doc_field: None}, {doc_field: {"$lt": utc(before)}}],
        }
        sort = [(doc_field, ASCENDING), ("_id", ASCENDING)]

        def op() -> list[Job]:
            return [document_to_job(d) for d in jobs.find(query, sort=sort, limit=limit)]

        return await self._call(op, "find_stale", read=True)


__all__ = [
    "ATOMIC_FERRETDB_MARK",
    "ATTEMPT_INDEXES",
    "BATCH_FIELD",
    "CLAIM_FIELD",
    "CLAIM_SORT",
    "COLLECTION",
    "FIELDS",
    "INDEXES",
    "RUN_FIELDS",
    "Document",
    "MongoJobStore",
    "attempt_to_document",
    "document_to_attempt",
    "document_to_job",
    "job_to_document",
]
