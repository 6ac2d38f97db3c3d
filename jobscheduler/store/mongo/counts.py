"""The MongoDB store's job counters: one document per (tenant, job type) in ``job_counts``,
a field per status, moved by ``$inc`` in the same call as the jobs' write (pure helpers and
the blocking writes, run in the store's worker threads).

Without multi-document transactions the counters' write follows the jobs' write: a call cut
off between the two (a network error, a crash) leaves a counter off by the jobs it moved,
which :func:`reconcile` (the reaper, now and then) puts right. Only a write whose old status
is known can be counted: a change expecting one of several statuses is first narrowed to
the status its job holds (:func:`narrow`), so every change the adapters send names one.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Final

import attrs
from pymongo import UpdateOne
from pymongo.collection import Collection
from pymongo.errors import PyMongoError

from jobscheduler.domain.model import Job, Status
from jobscheduler.domain.states import Change
from jobscheduler.store.query import CountKey

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


def moved(changes: Sequence[Change], results: Sequence[Job | bool | None]) -> Deltas:
    """The deltas of ``changes`` given their results (the job after each, or None/False
    where it did not apply): each applied change that writes a status moves one job of
    its (tenant, type) from the status it expected to that one."""
    deltas: Deltas = {}
    for change, result in zip(changes, results, strict=True):
        new = change.set.get("status")
        if not isinstance(result, Job) or new is None:
            continue
        old = expected_status(change)
        if old is None:
            log.debug("a change of unknown old status is not counted", extra={"job_id": result.id})
            continue
        if old is not Status(new):
            counter = deltas.setdefault((result.tenant_id, result.job_type), Counter())
            counter[old] -= 1
            counter[Status(new)] += 1
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
    statements = []
    for (tenant, job_type), counter in deltas.items():
        inc = {f"n.{status.value}": n for status, n in counter.items() if n}
        if inc:
            statements.append(
                UpdateOne(
                    {"_id": count_id(tenant, job_type)},
                    {"$inc": inc, "$set": {"tenantId": tenant, "jobType": job_type}},
                    upsert=True,
                )
            )
    if not statements:
        return
    try:
        counts.bulk_write(statements, ordered=False)
    except PyMongoError as exc:
        log.warning("job counters not written ; reconciled later", extra={"error": str(exc)})


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


def read(counts: Collection[Document], statuses: Iterable[Status] | None) -> dict[CountKey, int]:
    """The counters (blocking): (tenant, status, job type) -> n, zeros left out."""
    wanted = None if statuses is None else {Status(s) for s in statuses}
    found: dict[CountKey, int] = {}
    for doc in counts.find({}):
        for status, n in (doc.get("n") or {}).items():
            if n and (wanted is None or Status(status) in wanted):
                found[(doc["tenantId"], Status(status), doc["jobType"])] = int(n)
    return found


def recount(jobs: Collection[Document]) -> dict[CountKey, int]:
    """Every job counted by (tenant, status, job type): one ``$group`` (reads every job)."""
    pipeline: list[Document] = [
        {
            "$group": {
                "_id": {"t": "$tenantId", "s": "$status", "j": "$jobType"},
                "n": {"$sum": 1},
            }
        }
    ]
    return {
        (row["_id"]["t"], Status(row["_id"]["s"]), row["_id"]["j"]): int(row["n"])
        for row in jobs.aggregate(pipeline)
    }


def reconcile(
    jobs: Collection[Document], counts: Collection[Document]
) -> dict[CountKey, tuple[int, int]]:
    """Set the counters a recount finds wrong (blocking). Counters read before and after
    the recount: one that moved meanwhile is left for the next reconcile; one that did not
    is set by a write conditioned on the value it held, so a transition counted meanwhile
    is never overwritten."""
    before = read(counts, None)
    actual = recount(jobs)
    after = read(counts, None)
    wrong: dict[CountKey, tuple[int, int]] = {}
    for key in set(before) | set(actual) | set(after):
        kept = after.get(key, 0)
        if before.get(key, 0) != kept or actual.get(key, 0) == kept:
            continue
        tenant, status, job_type = key
        field = f"n.{status.value}"
        condition: dict[str, Any] = {field: kept} if kept else {field: {"$in": [0, None]}}
        result = counts.update_one(
            {"_id": count_id(tenant, job_type), **condition},
            {"$set": {field: actual.get(key, 0), "tenantId": tenant, "jobType": job_type}},
            upsert=False,
        )
        if not result.matched_count and not kept:
            counts.update_one(
                {"_id": count_id(tenant, job_type)},
                {
                    "$inc": {field: actual.get(key, 0)},
                    "$set": {"tenantId": tenant, "jobType": job_type},
                },
                upsert=True,
            )
        wrong[key] = (kept, actual.get(key, 0))
    return wrong


__all__ = [
    "COUNTS_COLLECTION",
    "Deltas",
    "added",
    "count_id",
    "merge",
    "moved",
    "narrow",
    "read",
    "reconcile",
    "recount",
    "write",
]
