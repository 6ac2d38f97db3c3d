"""The Mongo store's workflow records (``workflows`` collection) and the reads of their steps.

A record is one document (``_id`` the workflow's ObjectId, camelCase fields, its declared
steps as an array); it is unique by (tenantId, idempotencyKey). Its moves are conditional
``findAndModify`` updates, run one at a time where the server's own are not atomic (stock
FerretDB), like the jobs' transitions. A move whose outcome is unknown (a network error) is
recognised on a re-read when the document holds every value it writes, else sent once more.

The steps are documents of ``jobs``: :func:`prepare_workflows` adds the indexes that
find a workflow's steps by status, the children a step spawned, and the steps marked for
their workflow, by age.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

import attrs
from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, IndexModel, MongoClient, ReturnDocument
from pymongo.errors import DuplicateKeyError, PyMongoError

from jobscheduler.domain.attempts import decode_result
from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.states import WorkflowChange
from jobscheduler.domain.workflows import (
    WORKFLOW_TIME_FIELDS,
    DeclaredStep,
    Workflow,
    WorkflowStatus,
)
from jobscheduler.errors import DuplicateWorkflow, StoreError, WorkflowNotFound
from jobscheduler.store.query import Cursor, JobQuery
from jobscheduler.store.workflows import STEPS_TO_SETTLE, TenantScope, WorkflowQuery

from .codec import FIELDS, Document, decoded, document_to_job, encoded, job_filter, stored_time
from .seam import MongoSeam, outcome_unknown

log = logging.getLogger(__name__)

WORKFLOWS_COLLECTION: Final = "workflows"

#: Workflow field -> document field: a field jobs have too is named as in their documents
#: (:data:`~.codec.FIELDS`), one of its own (``steps``, ``version``) keeps its name.
_FIELDS: Final[Mapping[str, str]] = {
    field.name: FIELDS.get(field.name, field.name) for field in attrs.fields(Workflow)
} | {"step_count": "stepCount"}
#: A read without the declared steps (their number is stored beside them).
_LEAN: Final[Document] = {"steps": False}

WORKFLOW_INDEXES: Final = [
    IndexModel(
        [("tenantId", ASCENDING), ("idempotencyKey", ASCENDING)],
        name="tenant_idempotencyKey_unique",
        unique=True,
    ),
    IndexModel(
        [("tenantId", ASCENDING), ("createdAt", DESCENDING), ("_id", DESCENDING)],
        name="tenant_createdAt",
    ),
    IndexModel([("status", ASCENDING), ("createdAt", DESCENDING)], name="status_createdAt"),
    IndexModel([("status", ASCENDING), ("finishedAt", ASCENDING)], name="status_finishedAt"),
]
#: The jobs' indexes of the steps' reads.
STEP_INDEXES: Final = [
    IndexModel([(FIELDS["workflow_id"], ASCENDING), (FIELDS["status"], ASCENDING)], name="steps"),
    IndexModel(
        [(FIELDS["spawned_by"], ASCENDING), (FIELDS["status"], ASCENDING)], name="spawnedSteps"
    ),
    IndexModel(
        [(FIELDS["step_dirty"], ASCENDING), (FIELDS["updated_at"], ASCENDING)],
        name="stepsToSettle",
    ),
]


def prepare_workflows(client: MongoClient[Document], database: str, jobs: str) -> None:
    """The workflows collection's indexes and the jobs' step indexes, one per command; and
    the number of steps of each record stored before it was stored with them."""
    db = client.get_database(database)
    records = db.get_collection(WORKFLOWS_COLLECTION)
    for index in WORKFLOW_INDEXES:
        records.create_indexes([index])
    for index in STEP_INDEXES:
        db.get_collection(jobs).create_indexes([index])
    uncounted = {"stepCount": {"$exists": False}}
    for doc in records.find(uncounted, projection={"steps.jobId": True}):
        count = {"$set": {"stepCount": len(doc.get("steps") or [])}}
        records.update_one({"_id": doc["_id"], **uncounted}, count)


#: How a Workflow field is stored in its document (the others are stored as they are).
_WORKFLOW_ENCODERS: Final[Mapping[str, Callable[[Any], Any]]] = {
    "id": ObjectId,
    **dict.fromkeys(WORKFLOW_TIME_FIELDS, utc),
    "status": lambda status: WorkflowStatus(status).value,
    "steps": lambda steps: [step.to_json() for step in steps],
}


def _to_doc(field: str, value: Any) -> Any:
    return encoded(field, value, _WORKFLOW_ENCODERS)


def workflow_to_document(workflow: Workflow) -> Document:
    return {doc: _to_doc(field, getattr(workflow, field)) for field, doc in _FIELDS.items()}


#: How a Workflow field is read back from its document (the others are taken as they are).
_WORKFLOW_DECODERS: Final[Mapping[str, Callable[[Any], Any]]] = {
    "id": str,
    **dict.fromkeys(WORKFLOW_TIME_FIELDS, stored_time),
    "status": WorkflowStatus,
    "steps": lambda stored: tuple(DeclaredStep.from_json(step) for step in stored),
}


def document_to_workflow(doc: Mapping[str, Any]) -> Workflow:
    """The record ``doc`` holds (without its ``steps`` when read with :data:`_LEAN`)."""
    return Workflow(**decoded({"steps": [], **doc}, _FIELDS, _WORKFLOW_DECODERS))


def _change_filter(change: WorkflowChange) -> Document:
    query: Document = {"_id": ObjectId(change.workflow_id)}
    for field, expected in change.expect.items():
        if isinstance(expected, tuple):
            query[_FIELDS[field]] = {"$in": [_to_doc(field, v) for v in expected]}
        else:
            query[_FIELDS[field]] = _to_doc(field, expected)
    return query


class MongoWorkflowsMixin(MongoSeam):
    """Workflow records and step reads (a mixin of the Mongo store)."""

    async def insert_workflow(self, workflow: Workflow) -> Workflow:
        records = self._durable(WORKFLOWS_COLLECTION)
        doc = workflow_to_document(workflow)

        def duplicate(retried: bool) -> Workflow:
            held = records.find_one(
                {"tenantId": workflow.tenant_id, "idempotencyKey": workflow.idempotency_key},
                projection={"_id": True},
            )
            if held is None:
                raise StoreError(f"insert of workflow {workflow.id}: duplicate key, no holder")
            if retried and str(held["_id"]) == workflow.id:
                return workflow  # the insert whose reply was lost landed
            raise DuplicateWorkflow(
                f"idempotencyKey {workflow.idempotency_key!r} is already used by another workflow",
                existing_id=str(held["_id"]),
            )

        def op() -> Workflow:
            try:
                records.insert_one(dict(doc))
            except DuplicateKeyError:
                return duplicate(retried=False)
            except PyMongoError as exc:
                if not outcome_unknown(exc):
                    raise
                log.warning("workflow insert outcome unknown, retrying: %s", exc)
                try:
                    records.insert_one(dict(doc))
                except DuplicateKeyError:
                    return duplicate(retried=True)
            return workflow

        return await self._call(op, "insert_workflow")

    async def get_workflow(
        self, workflow_id: str, *, tenant: str | None = None, steps: bool = True
    ) -> Workflow:
        if not ObjectId.is_valid(workflow_id):
            raise WorkflowNotFound(f"workflow {workflow_id} not found")
        records = self._durable(WORKFLOWS_COLLECTION)
        query: Document = {"_id": ObjectId(workflow_id)}
        if tenant is not None:
            query["tenantId"] = tenant
        projection = None if steps else _LEAN
        doc = await self._call(
            lambda: records.find_one(query, projection=projection), "get_workflow", read=True
        )
        if doc is None:
            raise WorkflowNotFound(f"workflow {workflow_id} not found")
        return document_to_workflow(doc)

    async def find_workflows(
        self,
        query: WorkflowQuery,
        limit: int,
        after: Cursor | None = None,
        *,
        steps: bool = True,
    ) -> list[Workflow]:
        records = self._durable(WORKFLOWS_COLLECTION)
        where: Document = {}
        for field in ("tenant_id", "template_id"):
            if (value := getattr(query, field)) is not None:
                where[_FIELDS[field]] = value
        if query.statuses:
            where["status"] = {"$in": [s.value for s in query.statuses]}
        if query.key_prefix is not None:
            where["idempotencyKey"] = {
                "$gte": query.key_prefix,
                "$lt": query.key_prefix + "\U0010ffff",
            }
        created: Document = {}
        if query.created_before is not None:
            created["$lt"] = utc(query.created_before)
        sort = [("createdAt", DESCENDING), ("_id", DESCENDING)]

        projection = None if steps else _LEAN

        def read(found: Any) -> list[Workflow]:
            return [document_to_workflow(doc) for doc in found]

        def op() -> list[Workflow]:
            if after is None:
                match = {**where, **({"createdAt": created} if created else {})}
                return read(records.find(match, projection).sort(sort).limit(limit))
            # After a cursor: the records of its own createdAt with smaller ids, then older
            # ones (equalities and ranges only, as the jobs' pages do).
            at = utc(after.at)
            same = {**where, "createdAt": at, "_id": {"$lt": ObjectId(after.id)}}
            page = read(records.find(same, projection).sort(sort).limit(limit))
            if len(page) < limit:
                older = {**where, "createdAt": {**created, "$lt": min(at, created.get("$lt", at))}}
                rest = records.find(older, projection).sort(sort)
                page += read(rest.limit(limit - len(page)))
            return page

        return await self._call(op, "find_workflows", read=True)

    async def apply_workflow(self, change: WorkflowChange) -> Workflow | None:
        records = self._durable(WORKFLOWS_COLLECTION)
        where = _change_filter(change)
        values = {_FIELDS[f]: _to_doc(f, v) for f, v in change.set.items()}

        def send() -> Document | None:
            return records.find_one_and_update(
                where, {"$set": values}, return_document=ReturnDocument.AFTER
            )

        def op() -> Workflow | None:
            try:
                doc = send()
            except PyMongoError as exc:
                if not outcome_unknown(exc):
                    raise
                current = records.find_one({"_id": where["_id"]})
                if current is not None and all(current.get(k) == v for k, v in values.items()):
                    return document_to_workflow(current)  # the first send landed
                doc = send()
            return None if doc is None else document_to_workflow(doc)

        async with self._conditional_write():
            return await self._call(op, change.transition)

    async def workflow_steps(self, workflow_id: str, *, tenant: str | None = None) -> list[Job]:
        jobs = self._collection()
        query = job_filter(JobQuery(tenant_id=tenant, workflow_id=workflow_id))

        def op() -> list[Job]:
            found = [document_to_job(d) for d in jobs.find(query)]
            return sorted(found, key=lambda job: (job.created_at, job.id))

        return await self._call(op, "workflow_steps", read=True)

    async def any_job(self, query: JobQuery) -> bool:
        jobs = self._collection()
        where = job_filter(query)
        found = await self._call(
            lambda: jobs.find_one(where, projection={"_id": True}), "any_job", read=True
        )
        return found is not None

    async def spawned_results(self, spawner: str) -> dict[str, Any]:
        jobs = self._collection()
        completed = JobQuery(tenant_id=None, spawned_by=spawner, statuses=(Status.COMPLETED,))
        where = job_filter(completed)
        step, result = FIELDS["step"], FIELDS["result"]
        projection = {"_id": False, f"{step}.name": True, result: True}

        def op() -> dict[str, Any]:
            return {
                doc[step]["name"]: decode_result(doc.get(result))
                for doc in jobs.find(where, projection=projection)
            }

        return await self._call(op, "spawned_results", read=True)

    async def steps_to_settle(self, before: datetime, limit: int) -> list[Job]:
        jobs = self._collection()
        where = {**job_filter(STEPS_TO_SETTLE), FIELDS["updated_at"]: {"$lt": utc(before)}}
        sort = [(FIELDS["updated_at"], ASCENDING), ("_id", ASCENDING)]

        def op() -> list[Job]:
            return [document_to_job(d) for d in jobs.find(where, sort=sort, limit=limit)]

        return await self._call(op, "steps_to_settle", read=True)

    async def expired_workflows(
        self, status: WorkflowStatus, before: datetime, limit: int, scope: TenantScope
    ) -> list[Workflow]:
        records = self._durable(WORKFLOWS_COLLECTION)
        where: Document = {"status": status.value, "finishedAt": {"$lt": utc(before)}}
        tenants: Document = {}
        if scope.tenant is not None:
            tenants["$eq"] = scope.tenant
        if scope.skip_tenants:
            tenants["$nin"] = list(scope.skip_tenants)
        if tenants:
            where["tenantId"] = tenants

        def op() -> list[Workflow]:
            found = records.find(where, projection=_LEAN)
            ordered = found.sort([("finishedAt", ASCENDING), ("_id", ASCENDING)]).limit(limit)
            return [document_to_workflow(doc) for doc in ordered]

        return await self._call(op, "expired_workflows", read=True)

    async def delete_workflow_record(self, workflow: Workflow) -> bool:
        records = self._durable(WORKFLOWS_COLLECTION)
        _id = ObjectId(workflow.id)
        where = {
            "_id": _id,
            "status": workflow.status.value,
            "finishedAt": None if workflow.finished_at is None else utc(workflow.finished_at),
        }

        def op() -> bool:
            if records.delete_one(where).deleted_count:
                return True
            # Nothing deleted: moved on (kept), or gone already (a resend after an unknown
            # outcome finds its own delete done).
            return records.find_one({"_id": _id}, projection={"_id": True}) is None

        return await self._call(op, "delete_workflow_record")


__all__ = ["WORKFLOWS_COLLECTION", "MongoWorkflowsMixin", "prepare_workflows"]
