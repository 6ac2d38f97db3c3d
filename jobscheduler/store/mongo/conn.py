"""The MongoDB store's connection: client settings, indexes, server detection, thread plumbing.

Durability: writes use write concern ``{w: "majority", j: true}``, reads use read concern
``majority``, and the client asks for retryable writes (pymongo uses them only where the
server supports them: replica sets, sharded clusters). See :mod:`jobscheduler.store.mongo.store`
for what FerretDB (the test stack's server) does with these settings.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import UTC
from typing import Any, Final, TypeVar

import trio
from bson.errors import BSONError
from pymongo import ASCENDING, DESCENDING, IndexModel, MongoClient
from pymongo.collection import Collection
from pymongo.errors import (
    PyMongoError,
)
from pymongo.monitoring import CommandListener

from jobscheduler.domain.model import Job
from jobscheduler.errors import StoreError, ValidationError
from jobscheduler.store.base import JobStore

from . import counts, ends
from . import ledger as mongo_ledger
from .attempts import ATTEMPT_INDEXES, ATTEMPTS_COLLECTION
from .batch import BATCH_FIELD, CLAIM_FIELD
from .codec import CLAIM_SORT, COLLECTION, FIELDS, Document
from .flow import prepare_flow
from .notifications import create_notification_indexes
from .query import MANAGE_INDEXES, STATUS_UPDATED_INDEX
from .seam import durable_collection
from .seam import outcome_unknown as outcome_unknown
from .tenancy import GLOBAL_KEY_INDEX, create_tenancy_indexes
from .upkeep import prepare_upkeep
from .workers import create_workers_indexes
from .workflows import prepare_workflows

T = TypeVar("T")

log = logging.getLogger(__name__)

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
    # A batch reads back the documents it changed by their batch mark (:mod:`.batch`). MongoDB
    # would find them by ``_id $in`` alone; FerretDB evaluates only the mark in SQLite, and
    # without this index scans every document (300 ms at 10,000 jobs, 20 ms with it).
    IndexModel([(BATCH_FIELD, ASCENDING)], name="writeBatch"),
    IndexModel([(CLAIM_FIELD, ASCENDING)], name="claimBatch"),
]


#: Indexes of the jobs that older releases created and nothing reads any more, dropped at
#: start: the global idempotency-key index (the per-tenant one replaces it), the one the
#: Overview counted finished jobs with.
RETIRED_INDEXES: Final = (GLOBAL_KEY_INDEX, STATUS_UPDATED_INDEX)


def drop_retired_indexes(jobs: Collection[Document]) -> None:
    """Drop the :data:`RETIRED_INDEXES` that are present. Idempotent."""
    present = jobs.index_information()
    for name in RETIRED_INDEXES:
        if name in present:
            jobs.drop_index(name)


#: In the ``ferretdbVersion`` of a FerretDB built by ``scripts/deps.sh`` with its patch.
ATOMIC_FERRETDB_MARK: Final = "-jobscheduler"

#: Write errors that mean "this document is not storable" (BadValue — FerretDB's answer to
#: payload keys with "." or a leading "$" —, DollarPrefixedFieldName, DottedFieldName).
INVALID_DOCUMENT_CODES: Final = frozenset({2, 52, 57})


class MongoConnection(JobStore):
    """The connection half of :class:`~jobscheduler.store.mongo.store.MongoJobStore`: client,
    indexes, server quirks and the thread plumbing every call goes through (abstract: the JobStore
    methods live in the subclasses).

    ``server_selection_timeout`` (seconds) bounds how long any call waits for a reachable
    server before raising StoreError; it is also the connect timeout. ``socket_timeout``
    bounds one round trip on an established connection (a write whose reply does not come
    back in time is an unknown outcome, handled as described in the module docstring).
    ``limiter_tokens`` is the number of worker threads (and so pooled connections) this store
    uses at once.

    Server quirks (see the module docstring): ``serialize_writes`` forces (True) or forbids
    (False) running conditional writes one at a time; None (the default) enables it only when
    the server is a stock FerretDB, whose own writes are not atomic. ``claim_each`` makes a
    claim send one conditional statement per candidate (chunked) instead of one
    ``update_many``; None (the default) does so only on FerretDB, whose ``update_many``
    decodes every due document to find the candidates (4.3 s to claim 500 of 5,000 due jobs,
    2.2 s as statements by ``_id``, measured on a loaded machine).

    ``event_listeners`` are pymongo command listeners given to the client (e.g. the
    :class:`~jobscheduler.store.mongo.commands.CommandCounter` the roles export).
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
        claim_each: bool | None = None,
        event_listeners: Sequence[CommandListener] = (),
        on_audit_failure: Callable[[], None] | None = None,
    ) -> None:
        self._uri = uri
        #: Called when a create's audit record could not be written after its job
        #: (``insert(job, audit=...)``): the roles count it in api_audit_write_failures_total.
        self._on_audit_failure = on_audit_failure
        self._event_listeners = list(event_listeners)
        self._database = database
        self._server_selection_timeout = server_selection_timeout
        self._socket_timeout = socket_timeout
        self._limiter = trio.CapacityLimiter(limiter_tokens)
        self._serialize_option = serialize_writes
        self._serialize = bool(serialize_writes)
        self._claim_each_option = claim_each
        self._claim_each = bool(claim_each)
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
            event_listeners=self._event_listeners,
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
            drop_retired_indexes(jobs)
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
            prepare_workflows(client, self._database, COLLECTION)
            prepare_flow(jobs)
            database = client.get_database(self._database)
            prepare_upkeep(jobs, database.get_collection(counts.COUNTS_COLLECTION))
            ends.prepare(database, jobs)
            create_notification_indexes(client, self._database)
        except BaseException:
            client.close()
            raise
        return client, info

    def _jobs_of(self, client: MongoClient[Document]) -> Collection[Document]:
        return durable_collection(client.get_database(self._database), COLLECTION)

    def _ledger_of(self, client: MongoClient[Document]) -> Collection[Document]:
        return mongo_ledger.ledger_collection(client.get_database(self._database))

    def _attempts_of(self, client: MongoClient[Document]) -> Collection[Document]:
        return durable_collection(client.get_database(self._database), ATTEMPTS_COLLECTION)

    async def _start(self) -> None:
        client, info = await self._call(self._connect_sync, "start")
        self.server_info = info
        ferretdb = self.is_ferretdb
        stock_ferretdb = ferretdb and not self.is_atomic_ferretdb
        self._serialize = (
            stock_ferretdb if self._serialize_option is None else self._serialize_option
        )
        self._claim_each = ferretdb if self._claim_each_option is None else self._claim_each_option
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

    def _counts(self) -> Collection[Document]:
        """The job counters (:mod:`.counts`), beside the jobs."""
        jobs = self._collection()
        return jobs.database.get_collection(
            counts.COUNTS_COLLECTION, write_concern=jobs.write_concern
        )

    def _ends(self) -> Collection[Document]:
        """The counters of jobs that ended (:mod:`.ends`), beside the jobs."""
        jobs = self._collection()
        return jobs.database.get_collection(ends.ENDS_COLLECTION, write_concern=jobs.write_concern)

    def _count_inserted(self, stored: Iterable[Job]) -> None:
        """Count ``stored``, jobs just inserted, in the job counters and the counters of
        ends (blocking: after the jobs' write, in its worker thread)."""
        stored = list(stored)
        counts.write(self._counts(), counts.added(stored))
        ends.write(self._ends(), ends.inserted(stored))

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

    async def ping(self) -> None:
        """The server's ``ping`` command (abandoned if cancelled; bounded by the client's
        server-selection timeout)."""
        client = self._client
        if client is None:
            raise StoreError("MongoDB store is not started")
