"""The MongoDB store's counters of jobs that ended (see :mod:`jobscheduler.store.ends`):
one document per (tenant, step) in ``job_ends``, a field per end, moved by ``$inc`` in the
same call as the jobs' write, right after the job counters' (pure helpers and the blocking
writes, run in the store's worker threads).

As with the job counters, a call cut off between the jobs' write and this one leaves the
step short of the jobs it ended. Nothing recounts a step: it only feeds the throughput
figures, and it is forgotten after :data:`~jobscheduler.store.ends.KEPT`. A database made
before these counters has the ends of the last KEPT counted once from the jobs, by the
process that creates the collection (:func:`prepare`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Final

from pymongo import ASCENDING, IndexModel
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import OperationFailure

from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import Change
from jobscheduler.store.ends import KEPT, EndCount, ended, step_of
from jobscheduler.store.query import THROUGHPUT

from .codec import FIELDS, Document
from .counts import send, transitions

ENDS_COLLECTION: Final = "job_ends"

#: A tenant's steps from one on; every tenant's from one on (and the forgetting).
ENDS_INDEXES: Final = [
    IndexModel([("tenantId", ASCENDING), ("step", ASCENDING)], name="tenant_step"),
    IndexModel([("step", ASCENDING)], name="step"),
]

#: (tenant, step) -> end -> how many jobs reached it.
EndDeltas = dict[tuple[str, int], Counter[Status]]

#: The server's answer to creating a collection that exists.
_NAMESPACE_EXISTS: Final = 48


def prepare(database: Database[Document], jobs: Collection[Document]) -> None:
    """At start (blocking): the counters' collection and indexes. The process that creates
    the collection (a database made before these counters; a new one has no jobs) counts
    the ends of the last KEPT from the jobs, once: a process that starts beside it finds
    the collection there and counts nothing."""
    try:
        database.create_collection(ENDS_COLLECTION, check_exists=False)
        created = True
    except OperationFailure as exc:
        if exc.code != _NAMESPACE_EXISTS:
            raise
        created = False
    collection = database.get_collection(ENDS_COLLECTION, write_concern=jobs.write_concern)
    for index in ENDS_INDEXES:
        collection.create_indexes([index])
    if created:
        write(collection, _recent(jobs, datetime.now(UTC) - KEPT))


def _recent(jobs: Collection[Document], since: datetime) -> EndDeltas:
    """The ends of THROUGHPUT the jobs reached since ``since`` (blocking)."""
    tenant, status, updated = FIELDS["tenant_id"], FIELDS["status"], FIELDS["updated_at"]
    query = {status: {"$in": [s.value for s in THROUGHPUT]}, updated: {"$gte": since}}
    deltas: EndDeltas = {}
    for doc in jobs.find(query, projection={tenant: True, status: True, updated: True}):
        key = (doc[tenant], step_of(doc[updated]))
        deltas.setdefault(key, Counter())[Status(doc[status])] += 1
    return deltas


def inserted(jobs: Iterable[Job]) -> EndDeltas:
    """The ends of storing ``jobs`` (those stored already ended)."""
    deltas: EndDeltas = {}
    for job in jobs:
        if ended(job.status):
            deltas.setdefault((job.tenant_id, step_of(job.updated_at)), Counter())[job.status] += 1
    return deltas


def reached(changes: Sequence[Change], results: Sequence[Job | bool | None]) -> EndDeltas:
    """The ends of ``changes`` given their results: each of their
    :func:`~.counts.transitions` to an end from another status."""
    deltas: EndDeltas = {}
    for job, old, new in transitions(changes, results):
        if ended(new, old):
            deltas.setdefault((job.tenant_id, step_of(job.updated_at)), Counter())[new] += 1
    return deltas


def _id(tenant_id: str, step: int) -> str:
    return json.dumps([tenant_id, step], ensure_ascii=False)


def write(ends: Collection[Document], deltas: EndDeltas) -> None:
    """One upsert ``$inc`` per (tenant, step) that gained ends (blocking; see
    :func:`.counts.send`)."""
    upserts = [
        (
            {"_id": _id(tenant, step)},
            {
                "$inc": {f"n.{status.value}": n for status, n in counter.items()},
                "$set": {"tenantId": tenant, "step": step},
            },
        )
        for (tenant, step), counter in deltas.items()
    ]
    send(ends, upserts, "counters of ended jobs not written")


def read(ends: Collection[Document], tenant_id: str | None, first_step: int) -> list[EndCount]:
    """The counters from ``first_step`` on, of a tenant (None: of every tenant) (blocking)."""
    query: Document = {"step": {"$gte": first_step}}
    if tenant_id is not None:
        query = {"tenantId": tenant_id, **query}
    return [
        (Status(status), int(doc["step"]), int(n))
        for doc in ends.find(query, projection={"step": True, "n": True})
        for status, n in (doc.get("n") or {}).items()
    ]


def forget(ends: Collection[Document], before_step: int) -> int:
    """Delete the counters of the steps before ``before_step`` (blocking); how many."""
    return int(ends.delete_many({"step": {"$lt": before_step}}).deleted_count)


__all__ = [
    "ENDS_COLLECTION",
    "ENDS_INDEXES",
    "EndDeltas",
    "forget",
    "inserted",
    "prepare",
    "reached",
    "read",
    "write",
]
