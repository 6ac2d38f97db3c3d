"""The MongoDB store's job counters: one document per (tenant, job type) in ``job_counts``,
a field per status, moved by ``$inc`` in the same call as the jobs' write (pure helpers and
the blocking writes, run in the store's worker threads).

Without multi-document transactions the counters' write follows the jobs' write: a call cut
off between the two (a network error, a crash) leaves a counter off by the jobs it moved,
which the reaper's reconcile (:meth:`.upkeep.MongoUpkeepMixin.reconcile_counts`, now and
then) puts right from the indexes: :func:`drifts` counts each (tenant, status, job type)
with the ``count`` command, twice some time apart, and :func:`correct` moves by ``$inc``
only the counters found off by the same amount both times. Only a write whose old status
is known can be counted: a change expecting one of several statuses is first narrowed to
the status its job holds (:func:`narrow`), so every change the adapters send names one.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import attrs
from pymongo import ASCENDING, IndexModel, UpdateOne
from pymongo.collection import Collection
from pymongo.errors import PyMongoError

from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import Change
from jobscheduler.store.query import CountKey

from .batch import chunks, statement_size
from .codec import FIELDS, Document

log = logging.getLogger(__name__)

COUNTS_COLLECTION: Final = "job_counts"

#: (tenant, job type) -> status -> how many jobs it gains (negative: loses).
Deltas = dict[tuple[str, str], Counter[Status]]


def count_id(tenant_id: str, job_type: str) -> str:
    """The ``_id`` of the counters document of (tenant, job type): unambiguous JSON."""
    return json.dumps([tenant_id, job_type], ensure_ascii=False)


def added(jobs: Iterable[Job], sign: int = 1) -> Deltas:
    """The deltas of storing (``sign`` 1) or deleting (-1) ``jobs``."""
    deltas: Deltas = {}
    for job in jobs:
        deltas.setdefault((job.tenant_id, job.job_type), Counter())[job.status] += sign
    return deltas


def expected_status(change: Change) -> Status | None:
    """The one status ``change`` expects its job in, or None (several, or none)."""
    expected = change.expect.get("status")
    if expected is None or isinstance(expected, tuple):
        return None
    return Status(expected)


def transitions(
    changes: Sequence[Change], results: Sequence[Job | bool | None]
) -> Iterator[tuple[Job, Status, Status]]:
    """(the job after, its old status, its new one) of each of ``changes`` that applied
    (its result is the job after it, not None/False) and wrote a status, moving its job
    from the one status it expected. A change of unknown old status is left out: it
    cannot be counted."""
    for change, result in zip(changes, results, strict=True):
        new = change.set.get("status")
        if not isinstance(result, Job) or new is None:
            continue
        old = expected_status(change)
        if old is None:
            log.debug("a change of unknown old status is not counted", extra={"job_id": result.id})
            continue
        yield result, old, Status(new)


def moved(changes: Sequence[Change], results: Sequence[Job | bool | None]) -> Deltas:
    """The deltas of ``changes`` given their results: each of their :func:`transitions`
    moves one job of its (tenant, type) from its old status to its new one."""
    deltas: Deltas = {}
    for job, old, new in transitions(changes, results):
        if old is not new:
            counter = deltas.setdefault((job.tenant_id, job.job_type), Counter())
            counter[old] -= 1
            counter[new] += 1
    return deltas


def merge(*parts: Deltas) -> Deltas:
    total: Deltas = {}
    for part in parts:
        for key, counter in part.items():
            total.setdefault(key, Counter()).update(counter)
    return total


def write(counts: Collection[Document], deltas: Deltas) -> None:
    """One unordered ``$inc`` per (tenant, type) that moved (blocking). A failure is logged,
    not raised: the jobs' write it follows has landed, and the reconcile repairs the
    counters."""
    upserts = []
    for (tenant, job_type), counter in deltas.items():
        inc = {f"n.{status.value}": n for status, n in counter.items() if n}
        if inc:
            upserts.append(
                (
                    {"_id": count_id(tenant, job_type)},
                    {"$inc": inc, "$set": {"tenantId": tenant, "jobType": job_type}},
                )
            )
    send(counts, upserts, "job counters not written ; reconciled later")


def send(
    counters: Collection[Document], upserts: list[tuple[Document, Document]], failure: str
) -> None:
    """Counters' upserts, each (filter, ``$inc`` update), in unordered ``bulk_write`` commands
    of :func:`.batch.chunks`' size (the test stack's FerretDB never answers a command of
    many statements) (blocking). A command that fails is logged as ``failure``, not
    raised, and the next ones are sent: the jobs' write they follow has landed."""
    for chunk in chunks([statement_size(query, update) for query, update in upserts]):
        try:
            counters.bulk_write([UpdateOne(*upserts[i], upsert=True) for i in chunk], ordered=False)
        except PyMongoError as exc:
            log.warning(failure, extra={"error": str(exc), "counters": len(chunk)})


def narrow(jobs: Collection[Document], changes: Sequence[Change]) -> list[Change]:
    """``changes``, each expecting one of several statuses and writing a status narrowed to
    the status its job holds now (one ``find`` for all of them), so that what it moves can
    be counted. A job not in any of them keeps the change as it was: it cannot apply."""
    wide = [c for c in changes if "status" in c.set and isinstance(c.expect.get("status"), tuple)]
    if not wide:
        return list(changes)
    from bson import ObjectId

    ids = [ObjectId(change.job_id) for change in wide]
    status_field = FIELDS["status"]
    current = {
        str(doc["_id"]): Status(doc[status_field])
        for doc in jobs.find({"_id": {"$in": ids}}, projection={status_field: True})
    }
    narrowed = []
    for change in changes:
        expected = change.expect.get("status")
        holds = current.get(change.job_id)
        if isinstance(expected, tuple) and holds in {Status(s) for s in expected}:
            change = attrs.evolve(change, expect={**change.expect, "status": holds})
        narrowed.append(change)
    return narrowed


#: The counters of one tenant (a tenant's counts read only its own documents).
COUNTS_INDEXES: Final = [IndexModel([("tenantId", ASCENDING)], name="tenantId")]


def read(
    counts: Collection[Document],
    statuses: Iterable[Status] | None,
    tenant_id: str | None = None,
) -> dict[CountKey, int]:
    """The counters (blocking): (tenant, status, job type) -> n, zeros left out; of one
    tenant's job types (its documents only, by the ``tenantId`` index), or of every one."""
    wanted = None if statuses is None else {Status(s) for s in statuses}
    found: dict[CountKey, int] = {}
    for doc in counts.find({} if tenant_id is None else {"tenantId": tenant_id}):
        for status, n in (doc.get("n") or {}).items():
            if n and (wanted is None or Status(status) in wanted):
                found[(doc["tenantId"], Status(status), doc["jobType"])] = int(n)
    return found


#: Tries at one (tenant, job type) before the reconcile leaves it for the next one: its
#: counters must hold still while its jobs are counted.
STEADY_TRIES: Final = 3

#: (tenant, job type) -> status -> (counter, recount), where the two differ.
Drifts = dict[tuple[str, str], dict[Status, tuple[int, int]]]


def _count(jobs: Collection[Document], query: Document) -> int:
    """The ``count`` command (an index's COUNT_SCAN on MongoDB, one SQL ``COUNT(*)`` on the
    test stack's FerretDB; see :func:`.query.count_command`)."""
    return int(jobs.database.command("count", jobs.name, query=query)["n"])


def _skip_scan(jobs: Collection[Document], field: str, within: Document) -> list[str]:
    """The distinct values of ``field`` among the jobs matching ``within`` (equalities on
    the fields an index leads with before ``field``): one sorted ``find_one`` per value,
    each a seek in that index (``distinct`` reads every document on FerretDB)."""
    sort = [*((name, 1) for name in within), (field, 1)]
    found: list[str] = []
    while True:
        after = {field: {"$gt": found[-1]}} if found else {field: {"$exists": True}}
        doc = jobs.find_one({**within, **after}, sort=sort, projection={field: True})
        if doc is None:
            return found
        found.append(str(doc[field]))


def pairs(jobs: Collection[Document], counts: Collection[Document]) -> set[tuple[str, str]]:
    """Every (tenant, job type) that has jobs (skip scans of the tenant and (tenant, job
    type) indexes) or a counter that is not zero."""
    tenant, job_type = FIELDS["tenant_id"], FIELDS["job_type"]
    found = {
        (t, j)
        for t in _skip_scan(jobs, tenant, {})
        for j in _skip_scan(jobs, job_type, {tenant: t})
    }
    for doc in counts.find({}):
        if any(doc.get("n", {}).values()):
            found.add((doc["tenantId"], doc["jobType"]))
    return found


def _kept(doc: Document | None) -> dict[Status, int]:
    return {Status(s): int(n) for s, n in ((doc or {}).get("n") or {}).items() if n}


def drift(
    jobs: Collection[Document], counts: Collection[Document], pair: tuple[str, str]
) -> dict[Status, tuple[int, int]] | None:
    """(counter, recount) of each status of ``pair`` where they differ (blocking): one
    ``count`` per status (the (status, tenant, job type, ...) index). None when the
    counters moved while the jobs were counted, STEADY_TRIES times: a busy pair is left for
    the next reconcile."""
    tenant, job_type = pair
    where = {FIELDS["tenant_id"]: tenant, FIELDS["job_type"]: job_type}
    for _ in range(STEADY_TRIES):
        before = counts.find_one({"_id": count_id(tenant, job_type)})
        actual = {
            status: _count(jobs, {FIELDS["status"]: status.value, **where}) for status in Status
        }
        after = counts.find_one({"_id": count_id(tenant, job_type)})
        kept = _kept(before)
        if kept != _kept(after):
            continue
        return {
            status: (kept.get(status, 0), n)
            for status, n in actual.items()
            if kept.get(status, 0) != n
        }
    return None


def drifts(
    jobs: Collection[Document],
    counts: Collection[Document],
    among: Iterable[tuple[str, str]] | None = None,
) -> Drifts:
    """:func:`drift` of every pair (of :func:`pairs`, or ``among``) that has one."""
    found: Drifts = {}
    for pair in sorted(pairs(jobs, counts) if among is None else among):
        off = drift(jobs, counts, pair)
        if off:
            found[pair] = off
    return found


def correct(counts: Collection[Document], confirmed: Drifts) -> None:
    """Move each counter of ``confirmed`` by the recount minus it (blocking): an ``$inc``,
    so a transition counted meanwhile is kept."""
    deltas: Deltas = {
        pair: Counter({status: actual - kept for status, (kept, actual) in off.items()})
        for pair, off in confirmed.items()
    }
    statements = [
        UpdateOne(
            {"_id": count_id(tenant, job_type)},
            {
                "$inc": {f"n.{status.value}": n for status, n in counter.items() if n},
                "$set": {"tenantId": tenant, "jobType": job_type},
            },
            upsert=True,
        )
        for (tenant, job_type), counter in deltas.items()
        if any(counter.values())
    ]
    if statements:
        counts.bulk_write(statements, ordered=False)


def confirm(first: Drifts, second: Drifts) -> Drifts:
    """The drifts two looks some time apart found the same: a counter whose
    jobs' write had landed but whose ``$inc`` was still on its way looks off in one look
    only, while one a cut-off write left off stays off by the same amount."""
    confirmed: Drifts = {}
    for pair, off in first.items():
        again = second.get(pair, {})
        same = {
            status: (kept, actual)
            for status, (kept, actual) in off.items()
            if status in again and again[status][0] - again[status][1] == kept - actual
        }
        if same:
            confirmed[pair] = {status: again[status] for status in same}
    return confirmed


__all__ = [
    "COUNTS_COLLECTION",
    "COUNTS_INDEXES",
    "Deltas",
    "Drifts",
    "added",
    "confirm",
    "correct",
    "count_id",
    "drift",
    "drifts",
    "merge",
    "moved",
    "narrow",
    "pairs",
    "read",
    "write",
]
