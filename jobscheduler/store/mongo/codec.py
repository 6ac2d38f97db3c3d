"""The MongoDB store's document codec: how a Job and a Change look on the wire (pure).

One document per job in the ``jobs`` collection: ``_id`` is ``ObjectId(job.id)``, the other
fields use the camelCase names of the HTTP contract (:data:`FIELDS`), timestamps are BSON
dates (milliseconds, which is why :func:`jobscheduler.domain.model.utc` truncates to them) read back
timezone-aware UTC. A Change becomes a filter (``_id`` plus its expectations) and an update
(``$set`` and ``$inc``). Nothing here does I/O, so all of it is unit-tested without a server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING

from jobscheduler.domain.attempts import decode_result, encode_result
from jobscheduler.domain.cron import CronPolicy
from jobscheduler.domain.model import JOB_TIME_FIELDS, Job, Replay, Status, utc
from jobscheduler.domain.states import Change
from jobscheduler.domain.steps import Step
from jobscheduler.store.query import JobQuery

Document = dict[str, Any]

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
    "managed_by": "managedBy",
    "workflow_id": "workflowId",
    "step": "step",
    "spawned_by": "spawnedBy",
    "step_dirty": "stepDirty",
    "fairness_key": "fairnessKey",
    "concurrency_key": "concurrencyKey",
    "key_slot": "keySlot",
    "type_slot": "typeSlot",
    "finished_at": "finishedAt",
    "trace_parent": "traceParent",
}
STALE_FIELDS: Final = frozenset({"queued_at", "heartbeat_at"})
#: Left out of a document unless set (see the sparse ``run_unique`` index).
RUN_FIELDS: Final = ("template_id", "fire_at")
#: Left out unless held, and unset when freed: the slots' unique indexes are sparse (a
#: stored null would be indexed, and two of them would clash).
SLOT_DOC_FIELDS: Final = ("key_slot", "type_slot")

#: The order claims hand jobs out in (highest priority, then oldest, then oldest id).
CLAIM_SORT: Final = [
    (FIELDS["priority"], DESCENDING),
    (FIELDS["scheduled_at"], ASCENDING),
    ("_id", ASCENDING),
]


def encoded(field: str, value: Any, encoders: Mapping[str, Callable[[Any], Any]]) -> Any:
    """``value`` of the attribute ``field`` as stored: through its encoder if it has one;
    None stays None."""
    encode = encoders.get(field)
    return value if value is None or encode is None else encode(value)


#: How a Job field is stored in its document (the others are stored as they are).
_JOB_ENCODERS: Final[Mapping[str, Callable[[Any], Any]]] = {
    "id": ObjectId,
    **dict.fromkeys(JOB_TIME_FIELDS, utc),
    "status": lambda status: Status(status).value,
    "cron_policy": lambda policy: policy.to_storage(),
    "result": encode_result,
    "replays": lambda replays: [replay.to_json() for replay in replays],
    "step": lambda step: step.to_json(),
}


def to_doc(field: str, value: Any) -> Any:
    """A Job field value as stored in the document."""
    return encoded(field, value, _JOB_ENCODERS)


def job_to_document(job: Job) -> Document:
    """The document stored for ``job`` (every field present, absent values null, except the
    run identity fields, left out unless set: the sparse run index skips such documents)."""
    doc = {doc_field: to_doc(field, getattr(job, field)) for field, doc_field in FIELDS.items()}
    for field in (*RUN_FIELDS, *SLOT_DOC_FIELDS):
        if doc[FIELDS[field]] is None:
            del doc[FIELDS[field]]
    return doc


def stored_time(value: datetime) -> datetime:
    """A time read back from a document, aware and in UTC (the driver hands out naive UTC)."""
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def decoded(
    doc: Mapping[str, Any],
    fields: Mapping[str, str],
    decoders: Mapping[str, Callable[[Any], Any]],
) -> dict[str, Any]:
    """The attribute values ``doc`` holds, by attribute name (``fields``: attribute ->
    document field), each through its decoder if it has one; a missing or null field is
    left out (its attribute keeps its default)."""
    values: dict[str, Any] = {}
    for field, doc_field in fields.items():
        value = doc.get(doc_field)
        if value is not None:
            decode = decoders.get(field)
            values[field] = value if decode is None else decode(value)
    return values


#: How a Job field is read back from its document (the others are taken as they are).
_JOB_DECODERS: Final[Mapping[str, Callable[[Any], Any]]] = {
    "id": str,
    **dict.fromkeys(JOB_TIME_FIELDS, stored_time),
    "status": Status,
    "cron_policy": CronPolicy.from_storage,
    "result": decode_result,
    "replays": lambda stored: tuple(Replay.from_json(r) for r in stored),
    "step": Step.from_json,
}


def document_to_job(doc: Mapping[str, Any]) -> Job:
    """The Job a stored document describes (a missing optional field reads as None)."""
    return Job(**decoded(doc, FIELDS, _JOB_DECODERS))


def set_document(values: Mapping[str, Any]) -> Document:
    return {FIELDS[field]: to_doc(field, value) for field, value in values.items()}


def update_document(change: Change) -> Document:
    """``$set`` (and ``$inc``); a freed slot is ``$unset`` (see :data:`SLOT_DOC_FIELDS`)."""
    freed = [f for f in SLOT_DOC_FIELDS if f in change.set and change.set[f] is None]
    values = {f: v for f, v in change.set.items() if f not in freed}
    update: Document = {"$set": set_document(values)}
    if freed:
        update["$unset"] = {FIELDS[f]: "" for f in freed}
    if change.inc:
        update["$inc"] = {FIELDS[field]: amount for field, amount in change.inc.items()}
    return update


def change_filter(change: Change) -> Document:
    """``{_id, **expectations}``: None matches null or missing, a tuple means ``$in``."""
    query: Document = {"_id": ObjectId(change.job_id)}
    for field, expected in change.expect.items():
        doc_field = FIELDS[field]
        if isinstance(expected, tuple):
            query[doc_field] = {"$in": [to_doc(field, value) for value in expected]}
        else:
            query[doc_field] = to_doc(field, expected)
    return query


def resend_filter(change: Change) -> Document:
    """The filter of a write sent again after an unknown outcome. A change fenced by a claim
    token keeps its own filter (only its own run can match it). Any other (a pick) also needs
    the job unwritten since the change was made: its ``updatedAt`` no later than the
    change's. Without that, a pick whose first try landed and whose job the reaper then
    re-pended and the scheduler re-queued would start the job again, with the first try's
    clock."""
    query = change_filter(change)
    made_at = change.set.get("updated_at")
    if "claim_token" not in change.expect and made_at is not None:
        query[FIELDS["updated_at"]] = {"$lte": to_doc("updated_at", made_at)}
    return query


#: Upper bound of the keys that start with a prefix (the highest code point).
_PREFIX_END: Final = "\U0010ffff"
#: Below every date: ``{"$gte": _EPOCH}`` says "a date is set" as a range.
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def job_filter(query: JobQuery) -> Document:
    """The filter document selecting ``query``'s jobs: equalities and ranges on top-level
    fields (no ``$or``), the form that servers pushing filters down to their indexes (the
    test stack's patched FerretDB) serve best."""
    f = FIELDS
    out: Document = {}
    for field in ("tenant_id", "template_id", "job_type", "workflow_id", "spawned_by"):
        if (value := getattr(query, field)) is not None:
            out[f[field]] = value
    if query.statuses:
        values = sorted({Status(s).value for s in query.statuses})
        out[f["status"]] = values[0] if len(values) == 1 else {"$in": values}
    if query.cron is not None:
        # A template's ``cron`` is a non-empty string, anything else's is null or missing.
        # ``$gt: ""`` says "a string" as an index range, on MongoDB and on the test stack's
        # FerretDB alike; ``$ne: null`` is no range, and FerretDB walked every job of the
        # tenant for it (1.0 s at 100,000 jobs, against milliseconds).
        out[f["cron"]] = {"$gt": ""} if query.cron else None
    if query.buffered is not None:
        # The same for a date: a range, which FerretDB (patched) pushes down to SQLite.
        out[f["cron_buffered"]] = {"$gte": _EPOCH} if query.buffered else None
    if query.step_dirty is not None:
        out[f["step_dirty"]] = query.step_dirty
    times: dict[str, Document] = {}
    if query.created_after is not None:
        times.setdefault(f["created_at"], {})["$gte"] = utc(query.created_after)
    if query.created_before is not None:
        times.setdefault(f["created_at"], {})["$lt"] = utc(query.created_before)
    if query.due_by is not None:
        times.setdefault(f["scheduled_at"], {})["$lte"] = utc(query.due_by)
    if query.finished_before is not None:
        times.setdefault(f["finished_at"], {})["$lt"] = utc(query.finished_before)
    out.update(times)
    if query.idempotency_key is not None:
        out[f["idempotency_key"]] = query.idempotency_key
    elif query.key_prefix is not None:
        out[f["idempotency_key"]] = {
            "$gte": query.key_prefix,
            "$lt": query.key_prefix + _PREFIX_END,
        }
    if query.ids:
        out["_id"] = {"$in": [to_doc("id", job_id) for job_id in query.ids]}
    return out


def chain(first: Change, second: Change) -> Change | None:
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


def holds(doc: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """Whether ``doc`` holds every value the update would have written."""
    return all(doc.get(doc_field) == value for doc_field, value in values.items())
