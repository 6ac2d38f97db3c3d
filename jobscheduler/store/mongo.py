"""The production JobStore: MongoDB through pymongo, every call in a trio worker thread.

One document per job in the ``jobs`` collection: ``_id`` is ``ObjectId(job.id)``, the other
fields use the camelCase names of the HTTP contract (:data:`FIELDS`), timestamps are BSON
dates (milliseconds, which is why :func:`jobscheduler.model.utc` truncates to them) read back
timezone-aware UTC. Every transition is one ``findAndModify`` whose filter is ``_id`` plus the
Change's expectations. A claim reads the due candidates' ids in claim order, then claims each
with a ``findAndModify`` by ``_id`` that repeats the due filter, so each job is handed out
atomically without a multi-document transaction (a candidate another claimer took first is
skipped).

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
key means the first attempt landed, and the job is returned. :meth:`MongoJobStore.claim_due`
returns the jobs it already claimed when a later claim in its loop fails (a job whose claim
landed unseen stays ``queued`` until the reaper's ``QUEUED_TIMEOUT`` sweep requeues it).
Anything still failing is raised as :class:`~jobscheduler.errors.StoreError`.

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

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import attrs
import trio
from bson import ObjectId
from bson.errors import BSONError
from pymongo import ASCENDING, DESCENDING, IndexModel, MongoClient, ReturnDocument
from pymongo.collection import Collection
from pymongo.errors import (
    AutoReconnect,
    BulkWriteError,
    ConnectionFailure,
    DuplicateKeyError,
    NetworkTimeout,
    PyMongoError,
    ServerSelectionTimeoutError,
    WriteError,
)
from pymongo.read_concern import ReadConcern
from pymongo.write_concern import WriteConcern

from ..attempts import Attempt, decode_result, encode_result
from ..cron import CronPolicy, Occurrence, OccurrenceStatus
from ..errors import JobNotFound, StoreError, ValidationError
from ..model import Job, Replay, Status, utc
from ..states import Change, claim_fields
from . import mongo_ledger
from .base import InsertOutcome, JobStore, duplicate_of, first_of_each_key, spread_outcomes
from .mongo_attempts import (
    ATTEMPT_INDEXES,
    ATTEMPTS_COLLECTION,
    attempt_to_document,
    document_to_attempt,
    write_records,
)
from .mongo_query import MANAGE_INDEXES, ManageQueries
from .mongo_tenancy import MongoTenancyMixin, create_tenancy_indexes, drop_global_key_index
from .mongo_workers import MongoWorkersMixin, create_workers_indexes
from .query import Cursor, JobQuery, JobStats

T = TypeVar("T")
Document = dict[str, Any]

log = logging.getLogger(__name__)

COLLECTION: Final = "jobs"

#: Job field name -> document field name: the one place the mapping lives.
FIELDS: Final[Mapping[str, str]] = {
    "id": "_id",
    "idempotency_key": "idempotencyKey",
    "tenant_id": "tenantId",
    "job_type": "jobType",
    "payload": "payload",
    "priority": "priority",
    "status": "status",
    "scheduled_at": "scheduledAt",
    "cron": "cron",
    "attempts": "attempts",
    "max_attempts": "maxAttempts",
    "last_error": "lastError",
    "claimed_by": "claimedBy",
    "claimed_at": "claimedAt",
    "claim_token": "claimToken",
    "heartbeat_at": "heartbeatAt",
    "queued_at": "queuedAt",
    "created_at": "createdAt",
    "updated_at": "updatedAt",
    "cron_policy": "cronPolicy",
    "cron_buffered": "cronBuffered",
    # JSON text, not a sub-document: any JSON value round-trips (keys with "." or "$",
    # integers beyond 64 bits), and nothing queries inside it.
    "result": "result",
    "template_id": "templateId",
    "fire_at": "fireAt",
    "cancel_requested_at": "cancelRequestedAt",
    "replays": "replays",
}
_TIME_FIELDS: Final = frozenset(
    {
        "scheduled_at",
        "claimed_at",
        "heartbeat_at",
        "queued_at",
        "created_at",
        "updated_at",
        "fire_at",
        "cancel_requested_at",
        "cron_buffered",
    }
)
_STALE_FIELDS: Final = frozenset({"queued_at", "heartbeat_at"})
#: Left out of a document unless set (see the sparse ``run_unique`` index).
RUN_FIELDS: Final = ("template_id", "fire_at")

#: The order claims hand jobs out in (highest priority, then oldest, then oldest id).
CLAIM_SORT: Final = [
    (FIELDS["priority"], DESCENDING),
    (FIELDS["scheduled_at"], ASCENDING),
    ("_id", ASCENDING),
]

#: Created by :meth:`MongoJobStore.start` (``createIndexes`` is a no-op for an existing,
#: identical index, so starting twice is harmless; an index whose definition changed under
#: the same name fails the start with StoreError instead of being silently kept).
INDEXES: Final = [
    # Idempotency keys are unique per tenant (a key of another tenant is no conflict).
    IndexModel(
        [(FIELDS["tenant_id"], ASCENDING), (FIELDS["idempotency_key"], ASCENDING)],
        name="tenant_idempotencyKey_unique",
        unique=True,
    ),
    # A cron run's identity (template, fire time), whatever its key; sparse, so jobs that
    # are not runs (the fields left out) are not in it.
    IndexModel(
        [(FIELDS["template_id"], ASCENDING), (FIELDS["fire_at"], ASCENDING)],
        name="run_unique",
        unique=True,
        sparse=True,
    ),
    # Claims: equality on status, then exactly the claim sort, so the first due job is the
    # first index entry that passes the scheduledAt/cron filter (no in-memory sort).
    IndexModel([(FIELDS["status"], ASCENDING), *CLAIM_SORT], name="claim"),
    # next_due_at / due_templates: pending jobs by fire time.
    IndexModel(
        [(FIELDS["status"], ASCENDING), (FIELDS["scheduled_at"], ASCENDING)],
        name="status_scheduledAt",
    ),
    # list_jobs, with and without a status filter.
    IndexModel(
        [(FIELDS["tenant_id"], ASCENDING), (FIELDS["created_at"], DESCENDING), ("_id", DESCENDING)],
        name="tenant_createdAt",
    ),
    IndexModel(
        [
            (FIELDS["tenant_id"], ASCENDING),
            (FIELDS["status"], ASCENDING),
            (FIELDS["created_at"], DESCENDING),
            ("_id", DESCENDING),
        ],
        name="tenant_status_createdAt",
    ),
    # The reaper's two sweeps.
    IndexModel(
        [(FIELDS["status"], ASCENDING), (FIELDS["queued_at"], ASCENDING)], name="status_queuedAt"
    ),
    IndexModel(
        [(FIELDS["status"], ASCENDING), (FIELDS["heartbeat_at"], ASCENDING)],
        name="status_heartbeatAt",
    ),
    # Templates holding a fire time for overlap="buffer_one".
    IndexModel(
        [(FIELDS["status"], ASCENDING), (FIELDS["cron_buffered"], ASCENDING)],
        name="status_cronBuffered",
    ),
    *MANAGE_INDEXES,
]


#: In the ``ferretdbVersion`` of a FerretDB built by ``scripts/deps.sh`` with its patch.
ATOMIC_FERRETDB_MARK: Final = "-jobscheduler"

#: Write errors that mean "this document is not storable" (BadValue — FerretDB's answer to
#: payload keys with "." or a leading "$" —, DollarPrefixedFieldName, DottedFieldName).
_INVALID_DOCUMENT_CODES: Final = frozenset({2, 52, 57})

#: Errors after which a write may or may not have been applied.
_OUTCOME_UNKNOWN = (AutoReconnect, NetworkTimeout, ConnectionFailure)


def _outcome_unknown(exc: PyMongoError) -> bool:
    """A network failure during a write; not a server-selection timeout (nothing was sent,
    and retrying would only wait for another timeout)."""
    return isinstance(exc, _OUTCOME_UNKNOWN) and not isinstance(exc, ServerSelectionTimeoutError)


def _to_doc(field: str, value: Any) -> Any:
    """A Job field value as stored in the document."""
    if value is None:
        return None
    if field == "id":
        return ObjectId(value)
    if field in _TIME_FIELDS:
        return utc(value)
    if field == "status":
        return Status(value).value
    if field == "cron_policy":
        return value.to_storage()
    if field == "result":
        return encode_result(value)
    if field == "replays":
        return [replay.to_json() for replay in value]
    return value


def job_to_document(job: Job) -> Document:
    """The document stored for ``job`` (every field present, absent values null, except the
    run identity fields, left out unless set: the sparse run index skips such documents)."""
    doc = {doc_field: _to_doc(field, getattr(job, field)) for field, doc_field in FIELDS.items()}
    for field in RUN_FIELDS:
        if doc[FIELDS[field]] is None:
            del doc[FIELDS[field]]
    return doc


def document_to_job(doc: Mapping[str, Any]) -> Job:
    """The Job a stored document describes (a missing optional field reads as None)."""
    values: dict[str, Any] = {}
    for field, doc_field in FIELDS.items():
        value = doc.get(doc_field)
        if value is None:
            continue
        if field == "id":
            value = str(value)
        elif field in _TIME_FIELDS:
            value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
        elif field == "status":
            value = Status(value)
        elif field == "cron_policy":
            value = CronPolicy.from_storage(value)
        elif field == "result":
            value = decode_result(value)
        elif field == "replays":
            value = tuple(Replay.from_json(r) for r in value)
        values[field] = value
    return Job(**values)


def _set_document(values: Mapping[str, Any]) -> Document:
    return {FIELDS[field]: _to_doc(field, value) for field, value in values.items()}


def _update_document(change: Change) -> Document:
    update: Document = {"$set": _set_document(change.set)}
    if change.inc:
        update["$inc"] = {FIELDS[field]: amount for field, amount in change.inc.items()}
    return update


def _change_filter(change: Change) -> Document:
    """``{_id, **expectations}``: None matches null or missing, a tuple means ``$in``."""
    query: Document = {"_id": ObjectId(change.job_id)}
    for field, expected in change.expect.items():
        doc_field = FIELDS[field]
        if isinstance(expected, tuple):
            query[doc_field] = {"$in": [_to_doc(field, value) for value in expected]}
        else:
            query[doc_field] = _to_doc(field, expected)
    return query


def _due_filter(now: datetime) -> Document:
    """Due one-off jobs: pending, no cron (null or missing), ``scheduledAt <= now``."""
    return {
        FIELDS["status"]: Status.PENDING.value,
        FIELDS["cron"]: None,
        FIELDS["scheduled_at"]: {"$lte": utc(now)},
    }


def _chain(first: Change, second: Change) -> Change | None:
    """``first`` then ``second`` as one Change, when that is exactly equivalent: same job,
    every expectation of ``second`` is a value ``first`` writes, and ``second`` writes only
    fields ``first`` writes too (so the state between them can be rebuilt). Else None."""
    if first.job_id != second.job_id or not set(second.set) <= set(first.set):
        return None
    if first.record is not None or second.record is not None or set(first.inc) & set(second.inc):
        return None
    if set(second.expect) & set(first.inc):
        return None
    for field, expected in second.expect.items():
        if field not in first.set:
            return None
        written = first.set[field]
        if not (written == expected or (isinstance(expected, tuple) and written in expected)):
            return None
    return Change(
        transition=f"{first.transition}+{second.transition}",
        job_id=first.job_id,
        expect=first.expect,
        set={**first.set, **second.set},
        inc={**first.inc, **second.inc},
    )


def _holds(doc: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """Whether ``doc`` holds every value the update would have written."""
    return all(doc.get(doc_field) == value for doc_field, value in values.items())


class MongoJobStore(MongoWorkersMixin, MongoTenancyMixin, JobStore):
    """JobStore on a MongoDB (or MongoDB wire-protocol) server.

    ``server_selection_timeout`` (seconds) bounds how long any call waits for a reachable
    server before raising StoreError; it is also the connect timeout. ``socket_timeout``
    bounds one round trip on an established connection (a write whose reply does not come
    back in time is an unknown outcome, handled as described in the module docstring).
    ``limiter_tokens`` is the number of worker threads (and so pooled connections) this store
    uses at once.

    Server quirks (see the module docstring): ``serialize_writes`` forces (True) or forbids
    (False) running conditional writes one at a time; None (the default) enables it only when
    the server is a stock FerretDB, whose own writes are not atomic.
    """

    def __init__(
        self,
        uri: str,
        database: str = "jobscheduler",
        *,
        server_selection_timeout: float = 5.0,
        socket_timeout: float = 30.0,
        limiter_tokens: int = 16,
        serialize_writes: bool | None = None,
    ) -> None:
        self._uri = uri
        self._database = database
        self._server_selection_timeout = server_selection_timeout
        self._socket_timeout = socket_timeout
        self._limiter = trio.CapacityLimiter(limiter_tokens)
        self._serialize_option = serialize_writes
        self._serialize = bool(serialize_writes)
        self._write_lock = trio.Lock()
        self._start_lock = trio.Lock()
        self._client: MongoClient[Document] | None = None
        self._jobs: Collection[Document] | None = None
        self._attempts: Collection[Document] | None = None
        #: The server's ``buildInfo`` (set by :meth:`start`).
        self.server_info: dict[str, Any] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_ferretdb(self) -> bool:
        """True when the server identified itself as FerretDB (after :meth:`start`)."""
        return "ferretdbVersion" in self.server_info

    @property
    def is_atomic_ferretdb(self) -> bool:
        """True for a FerretDB built with this project's patch (atomic conditional writes)."""
        return ATOMIC_FERRETDB_MARK in self.server_info.get("ferretdbVersion", "")

    @property
    def serializes_writes(self) -> bool:
        """True when conditional writes run one at a time (stock FerretDB, or forced)."""
        return self._serialize

    async def start(self) -> None:
        """Connect, detect FerretDB, and create the indexes. Idempotent.

        Raises StoreError (after about ``server_selection_timeout``) if no server answers.
        """
        async with self._start_lock:
            if self._client is None:
                await self._start()

    def _new_client(self, *, retry_writes: bool) -> MongoClient[Document]:
        timeout_ms = max(1, int(self._server_selection_timeout * 1000))
        return MongoClient(
            self._uri,
            tz_aware=True,
            tzinfo=UTC,
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            socketTimeoutMS=max(1, int(self._socket_timeout * 1000)),
            retryWrites=retry_writes,
            maxPoolSize=self._limiter.total_tokens + 2,
            appname="jobscheduler",
            connect=False,
        )

    def _connect_sync(self) -> tuple[MongoClient[Document], dict[str, Any]]:
        client = self._new_client(retry_writes=True)
        try:
            info: dict[str, Any] = client.admin.command("buildInfo")
            hello: dict[str, Any] = client.admin.command("hello")
            if "ferretdbVersion" in info and hello.get("setName"):
                # A FerretDB started with --repl-set-name looks like a replica set, so pymongo
                # would retry a write whose reply was lost with the same txnNumber; FerretDB
                # ignores txnNumber and runs the write twice (a conditional update's retry
                # then reports "lost the race" although the first attempt won). Standalone
                # FerretDB gets no retryable writes anyway, so only this case degrades.
                client.close()
                client = self._new_client(retry_writes=False)
            jobs = self._jobs_of(client)
            drop_global_key_index(jobs)
            for index in INDEXES:
                # One index per createIndexes: FerretDB v1.24 panics (and drops the
                # connection) when one command names two or more indexes that already
                # exist — its "skip identical index" step deletes from a shrinking slice by
                # the original position. One at a time is standard and costs 7 round trips.
                jobs.create_indexes([index])
            mongo_ledger.create_ledger_indexes(self._ledger_of(client))
            attempts = self._attempts_of(client)
            for index in ATTEMPT_INDEXES:
                attempts.create_indexes([index])
            create_tenancy_indexes(client, self._database)
            create_workers_indexes(client, self._database)
        except BaseException:
            client.close()
            raise
        return client, info

    def _jobs_of(self, client: MongoClient[Document]) -> Collection[Document]:
        return client.get_database(self._database).get_collection(
            COLLECTION,
            write_concern=WriteConcern(w="majority", j=True),
            read_concern=ReadConcern("majority"),
        )

    def _ledger_of(self, client: MongoClient[Document]) -> Collection[Document]:
        return mongo_ledger.ledger_collection(client.get_database(self._database))

    def _attempts_of(self, client: MongoClient[Document]) -> Collection[Document]:
        return client.get_database(self._database).get_collection(
            ATTEMPTS_COLLECTION,
            write_concern=WriteConcern(w="majority", j=True),
            read_concern=ReadConcern("majority"),
        )

    async def _start(self) -> None:
        client, info = await self._call(self._connect_sync, "start")
        self.server_info = info
        ferretdb = self.is_ferretdb
        stock_ferretdb = ferretdb and not self.is_atomic_ferretdb
        self._serialize = (
            stock_ferretdb if self._serialize_option is None else self._serialize_option
        )
        self._client, self._jobs = client, self._jobs_of(client)
        self._attempts = self._attempts_of(client)
        log.info(
            "mongo store started database=%s server=%s serialize_writes=%s",
            self._database,
            f"FerretDB {info['ferretdbVersion']}" if ferretdb else f"MongoDB {info.get('version')}",
            self._serialize,
        )
        if stock_ferretdb:
            log.warning(
                "stock FerretDB: its conditional writes are not atomic, so only one process "
                "may use this database; build it with scripts/deps.sh for several"
            )

    async def close(self) -> None:
        """Close the client. Safe to call twice."""
        client, self._client, self._jobs = self._client, None, None
        self._attempts = None
        if client is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(client.close, limiter=self._limiter)

    # ------------------------------------------------------------------ plumbing

    def _collection(self) -> Collection[Document]:
        if self._jobs is None:
            raise StoreError("MongoDB store is not started")
        return self._jobs

    async def _call(self, fn: Callable[[], T], what: str, *, read: bool = False) -> T:
        """Run ``fn`` in a worker thread under this store's limiter; map driver errors.

        Reads may be abandoned on cancellation (they have no effect); writes are waited for,
        so a cancelled caller never leaves a write running unseen (bounded by the timeouts).
        """
        try:
            return await trio.to_thread.run_sync(fn, limiter=self._limiter, abandon_on_cancel=read)
        except PyMongoError as exc:
            raise StoreError(f"MongoDB {what} failed: {exc}") from exc
        except BSONError as exc:
            raise StoreError(f"MongoDB {what}: cannot encode/decode document: {exc}") from exc
        except UnicodeEncodeError as exc:
            # BSON strings are UTF-8: a lone surrogate cannot be sent (the API refuses
            # those at parse time; this keeps any other caller from seeing a raw error).
            raise ValidationError(f"a string is not valid Unicode: {exc.reason}") from exc

    @contextlib.asynccontextmanager
    async def _conditional_write(self) -> AsyncIterator[None]:
        if self._serialize:
            async with self._write_lock:
                yield
        else:
            yield

    # ------------------------------------------------------------------ JobStore

    async def ping(self) -> None:
        """The server's ``ping`` command (abandoned if cancelled; bounded by the client's
        server-selection timeout)."""
        client = self._client
        if client is None:
            raise StoreError("MongoDB store is not started")
        await self._call(lambda: client.admin.command("ping"), "ping", read=True)

    async def insert(self, job: Job) -> Job:
        """Insert; DuplicateJob if the idempotencyKey is used (see module doc for retries)."""
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
            try:
                jobs.insert_one(dict(doc))
            except DuplicateKeyError as exc:
                return duplicate(exc, retried=False)
            except WriteError as exc:
                if exc.code in _INVALID_DOCUMENT_CODES:
                    message = (exc.details or {}).get("errmsg") or str(exc)
                    raise ValidationError(f"payload: rejected by the store: {message}") from None
                raise
            except PyMongoError as exc:
                if not _outcome_unknown(exc):
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
                if not _outcome_unknown(exc):
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
                elif error.get("code") in _INVALID_DOCUMENT_CODES:
                    message = error.get("errmsg") or "invalid document"
                    outcomes.append(ValidationError(f"payload: rejected by the store: {message}"))
                else:
                    raise StoreError(f"insert of job {job.id} failed: {error.get('errmsg')}")
            return outcomes

        return spread_outcomes(jobs, await self._call(op, "insert_many"), later)

    async def get(self, job_id: str) -> Job:
        if not ObjectId.is_valid(job_id):
            raise JobNotFound(f"job {job_id} not found")
        jobs = self._collection()
        doc = await self._call(lambda: jobs.find_one({"_id": ObjectId(job_id)}), "get", read=True)
        if doc is None:
            raise JobNotFound(f"job {job_id} not found")
        return document_to_job(doc)

    async def find_run(self, template_id: str, fire_at: datetime) -> Job | None:
        jobs = self._collection()
        query = {FIELDS["template_id"]: template_id, FIELDS["fire_at"]: utc(fire_at)}
        doc = await self._call(lambda: jobs.find_one(query), "find_run", read=True)
        return None if doc is None else document_to_job(doc)

    async def list_jobs(self, tenant_id: str, status: Status | None, limit: int) -> list[Job]:
        jobs = self._collection()
        query: Document = {FIELDS["tenant_id"]: tenant_id}
        if status is not None:
            query[FIELDS["status"]] = Status(status).value
        sort = [(FIELDS["created_at"], DESCENDING), ("_id", DESCENDING)]

        def op() -> list[Job]:
            return [document_to_job(d) for d in jobs.find(query, sort=sort, limit=limit)]

        return await self._call(op, "list", read=True)

    async def claim_due(self, now: datetime, limit: int) -> list[Job]:
        """Claim up to ``limit`` due jobs in one thread hop.

        One read of the due candidates' ids in claim order (priority desc, then
        ``scheduledAt``), then one ``findAndModify`` per candidate: ``_id`` plus the due filter
        again, ``$set`` of ``claim_fields(now)``. Each is atomic, so concurrent claimers never
        share a job; a candidate another claimer took first is skipped, and the batch comes
        back short. If a claim fails after some jobs were claimed, those jobs are returned
        (they are queued and must be announced); a failure before any claim raises
        StoreError.
        """
        if limit <= 0:
            return []
        jobs = self._collection()
        query = _due_filter(now)
        update = {"$set": _set_document(claim_fields(now))}

        def claim() -> list[Job]:
            candidates = jobs.find(query, projection={"_id": True}, sort=CLAIM_SORT, limit=limit)
            claimed: list[Job] = []
            for _id in [doc["_id"] for doc in candidates]:
                try:
                    doc = jobs.find_one_and_update(
                        {**query, "_id": _id}, update, return_document=ReturnDocument.AFTER
                    )
                except PyMongoError as exc:
                    if not claimed:
                        raise
                    log.warning("claim stopped after %d jobs: %s", len(claimed), exc)
                    break
                if doc is not None:
                    claimed.append(document_to_job(doc))
            return claimed

        async with self._conditional_write():
            return await self._call(claim, "claim")

    async def due_templates(self, now: datetime, limit: int) -> list[Job]:
        jobs = self._collection()
        query: Document = {
            FIELDS["status"]: Status.PENDING.value,
            FIELDS["cron"]: {"$ne": None},
            FIELDS["scheduled_at"]: {"$lte": utc(now)},
        }
        sort = [(FIELDS["scheduled_at"], ASCENDING), ("_id", ASCENDING)]

        def op() -> list[Job]:
            return [document_to_job(d) for d in jobs.find(query, sort=sort, limit=limit)]

        return await self._call(op, "due_templates", read=True)

    async def next_due_at(self) -> datetime | None:
        jobs = self._collection()
        field = FIELDS["scheduled_at"]

        def op() -> datetime | None:
            cursor = jobs.find(
                {FIELDS["status"]: Status.PENDING.value},
                projection={field: True},
                sort=[(field, ASCENDING)],
                limit=1,
            )
            for doc in cursor:
                value: datetime = doc[field]
                return value.astimezone(UTC)
            return None

        return await self._call(op, "next_due_at", read=True)

    def _apply_sync(self, change: Change) -> Job | None:
        """One conditional ``findAndModify`` (runs in a worker thread); see module doc."""
        jobs = self._collection()
        query = _change_filter(change)
        values = _set_document(change.set)
        update = _update_document(change)

        def attempt() -> Job | None:
            doc = jobs.find_one_and_update(query, update, return_document=ReturnDocument.AFTER)
            return None if doc is None else document_to_job(doc)

        try:
            return attempt()
        except PyMongoError as exc:
            if not _outcome_unknown(exc):
                raise
            log.warning(
                "%s outcome unknown job_id=%s, re-reading: %s",
                change.transition,
                change.job_id,
                exc,
            )
        current = jobs.find_one({"_id": query["_id"]})
        if current is not None and _holds(current, values):
            return document_to_job(current)
        return attempt()

    def _record_sync(self, changes: Sequence[Change], results: Sequence[Job | bool | None]) -> None:
        if self._attempts is not None:
            write_records(self._attempts, changes, results)

    async def apply(self, change: Change) -> Job | None:
        def op() -> Job | None:
            result = self._apply_sync(change)
            self._record_sync([change], [result])
            return result

        async with self._conditional_write():
            return await self._call(op, change.transition)

    async def apply_many(self, changes: Sequence[Change]) -> list[Job | None]:
        """Apply the changes one after another in a single thread hop (not a transaction).

        Two consecutive changes of one job that chain (see :func:`_chain`, e.g. an executor's
        pick then start) go as one ``findAndModify``: the same outcome as applying them in
        turn with nothing in between, for one round trip instead of two. If that update
        matches nothing, the second change is still tried alone, as it would have been.
        """
        if not changes:
            return []

        def apply_all() -> list[Job | None]:
            results: list[Job | None] = []
            i = 0
            while i < len(changes):
                first = changes[i]
                second = changes[i + 1] if i + 1 < len(changes) else None
                chained = _chain(first, second) if second is not None else None
                if chained is None or second is None:
                    results.append(self._apply_sync(first))
                    i += 1
                    continue
                after = self._apply_sync(chained)
                if after is None:
                    results += [None, self._apply_sync(second)]
                else:
                    # The state between the two: the second change's fields as the first set
                    # them, and its increments not yet added.
                    before = {f: first.set[f] for f in second.set}
                    before.update({f: getattr(after, f) - n for f, n in second.inc.items()})
                    results += [attrs.evolve(after, **before), after]
                i += 2
            self._record_sync(changes, results)
            return results

        async with self._conditional_write():
            return await self._call(apply_all, "apply_many")

    async def find_stale(
        self, statuses: Sequence[Status], field: str, before: datetime, limit: int
    ) -> list[Job]:
        """A null or missing ``field`` counts as stale; oldest (nulls) first."""
        if field not in _STALE_FIELDS:
            raise ValueError(f"find_stale: field must be one of {sorted(_STALE_FIELDS)}")
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

    async def count_by_status(self) -> dict[Status, int]:
        jobs = self._collection()
        pipeline = [{"$group": {"_id": f"${FIELDS['status']}", "n": {"$sum": 1}}}]

        def op() -> list[Document]:
            return list(jobs.aggregate(pipeline))

        rows = await self._call(op, "count_by_status", read=True)
        counts = dict.fromkeys(Status, 0)
        for row in rows:
            counts[Status(row["_id"])] = int(row["n"])
        return counts

    # ------------------------------------------------------------------ cron ledger

    def _ledger(self) -> Collection[Document]:
        if self._client is None:
            raise StoreError("MongoDB store is not started")
        return self._ledger_of(self._client)

    async def record_occurrences(
        self, records: Sequence[Occurrence]
    ) -> list[tuple[Occurrence, bool]]:
        if not records:
            return []
        ledger = self._ledger()
        return await self._call(lambda: mongo_ledger.record(ledger, records), "record_occurrences")

    async def occurrences(
        self,
        template_id: str,
        *,
        limit: int,
        before: datetime | None = None,
        statuses: Sequence[OccurrenceStatus] | None = None,
    ) -> list[Occurrence]:
        ledger = self._ledger()
        return await self._call(
            lambda: mongo_ledger.select(ledger, template_id, before, limit, statuses),
            "occurrences",
            read=True,
        )

    async def prune_occurrences(self, before: datetime) -> int:
        ledger = self._ledger()
        return await self._call(lambda: mongo_ledger.prune(ledger, before), "prune_occurrences")

    async def buffered_templates(self, limit: int) -> list[Job]:
        jobs = self._collection()
        query: Document = {
            FIELDS["status"]: Status.PENDING.value,
            # A range, not ``$ne: null``: FerretDB (patched) pushes ranges down to SQLite.
            FIELDS["cron_buffered"]: {"$gte": datetime(1970, 1, 1, tzinfo=UTC)},
        }
        sort = [(FIELDS["cron_buffered"], ASCENDING)]

        def op() -> list[Job]:
            return [document_to_job(d) for d in jobs.find(query, sort=sort, limit=limit)]

        return await self._call(op, "buffered_templates", read=True)

    # ------------------------------------------------------------------ management

    def _manage(self) -> ManageQueries:
        return ManageQueries(
            self._collection(),
            FIELDS,
            document_to_job,
            _change_filter,
            _to_doc,
            _update_document,
        )

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        manage = self._manage()
        return await self._call(lambda: manage.find(query, limit, after), "find_jobs", read=True)

    async def apply_bulk(self, changes: Sequence[Change]) -> int:
        """Conditional updates in one thread hop, nothing read back (see ManageQueries)."""
        if not changes:
            return 0
        manage = self._manage()

        def op() -> int:
            applied = manage.apply_bulk(changes)
            self._record_sync(changes, applied)
            return sum(applied)

        async with self._conditional_write():
            return await self._call(op, "apply_bulk")

    async def stats(self, tenant_id: str | None, now: datetime) -> JobStats:
        manage = self._manage()
        return await self._call(lambda: manage.stats(tenant_id, now), "stats", read=True)

    def _attempts_collection(self) -> Collection[Document]:
        if self._attempts is None:
            raise StoreError("MongoDB store is not started")
        return self._attempts

    async def attempts(self, job_id: str) -> list[Attempt]:
        records = self._attempts_collection()
        sort = [("number", ASCENDING), ("finishedAt", ASCENDING)]

        def op() -> list[Attempt]:
            return [document_to_attempt(d) for d in records.find({"jobId": job_id}, sort=sort)]

        return await self._call(op, "attempts", read=True)

    async def prune_attempts(self, before: datetime) -> int:
        records = self._attempts_collection()
        query = {"finishedAt": {"$lt": utc(before)}}
        result = await self._call(lambda: records.delete_many(query), "prune_attempts")
        return int(result.deleted_count)


__all__ = [
    "ATTEMPT_INDEXES",
    "FIELDS",
    "INDEXES",
    "MongoJobStore",
    "attempt_to_document",
    "document_to_attempt",
    "document_to_job",
    "job_to_document",
]
