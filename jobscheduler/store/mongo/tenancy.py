"""The MongoDB collections of tenancy: ``api_keys`` and ``audit``.

A mixin of :class:`~jobscheduler.store.mongo.store.MongoJobStore` (it uses that store's ``_call``
plumbing and client); the indexes are created at ``start`` with the jobs' indexes. Key
documents use ``_id`` = the key id; audit documents ``_id`` = ``ObjectId(record.id)``, so the
default ``_id`` index orders them by creation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from bson import ObjectId
from pymongo import ASCENDING, DESCENDING, IndexModel, MongoClient, ReturnDocument
from pymongo.errors import DuplicateKeyError

from jobscheduler.domain.audit import AuditQuery, AuditRecord, audit_fields
from jobscheduler.domain.keys import ApiKey, Role
from jobscheduler.domain.model import utc

from .codec import Document, stored_time
from .seam import MongoSeam

KEYS_COLLECTION: Final = "api_keys"
AUDIT_COLLECTION: Final = "audit"

AUDIT_INDEXES: Final = [
    IndexModel([("at", ASCENDING)], name="at"),
    IndexModel([("tenantId", ASCENDING), ("_id", DESCENDING)], name="tenant_id"),
]


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return stored_time(value)


def key_to_document(key: ApiKey) -> Document:
    return {
        "_id": key.id,
        "secretHash": key.secret_hash,
        "tenantId": key.tenant,
        "role": key.role.value,
        "name": key.name,
        "createdAt": utc(key.created_at),
        "revokedAt": None if key.revoked_at is None else utc(key.revoked_at),
    }


def document_to_key(doc: Mapping[str, Any]) -> ApiKey:
    created = _aware(doc["createdAt"])
    assert created is not None
    return ApiKey(
        id=doc["_id"],
        secret_hash=doc["secretHash"],
        tenant=doc.get("tenantId"),
        role=Role(doc["role"]),
        name=doc.get("name") or "",
        created_at=created,
        revoked_at=_aware(doc.get("revokedAt")),
    )


def audit_to_document(record: AuditRecord) -> Document:
    return {"_id": ObjectId(record.id), "at": utc(record.at), **audit_fields(record)}


def document_to_audit(doc: Mapping[str, Any]) -> AuditRecord:
    at = _aware(doc["at"])
    assert at is not None
    return AuditRecord(
        id=str(doc["_id"]),
        at=at,
        key_id=doc.get("keyId"),
        tenant=doc.get("tenantId"),
        action=doc["action"],
        job_id=doc.get("jobId"),
        status=int(doc["status"]),
        detail=doc.get("detail"),
    )


def audit_filter(query: AuditQuery) -> Document:
    filt: Document = {}
    for field, value in (
        ("tenantId", query.tenant),
        ("keyId", query.key_id),
        ("action", query.action),
        ("jobId", query.job_id),
    ):
        if value is not None:
            filt[field] = value
    at: Document = {}
    if query.since is not None:
        at["$gte"] = utc(query.since)
    if query.until is not None:
        at["$lt"] = utc(query.until)
    if at:
        filt["at"] = at
    if query.before is not None:
        filt["_id"] = {"$lt": ObjectId(query.before)}
    return filt


#: The index of releases where idempotency keys were unique across tenants.
GLOBAL_KEY_INDEX: Final = "idempotencyKey_unique"


def create_tenancy_indexes(client: MongoClient[Document], database: str) -> None:
    """Create the audit collection's indexes (one per command, as for the jobs)."""
    audit = client.get_database(database).get_collection(AUDIT_COLLECTION)
    for index in AUDIT_INDEXES:
        audit.create_indexes([index])


class MongoTenancyMixin(MongoSeam):
    """Keys and audit records in the store's database."""

    async def insert_key(self, key: ApiKey) -> ApiKey:
        await self._insert_new(KEYS_COLLECTION, key_to_document(key), "key")
        return key

    async def get_key(self, key_id: str, *, tenant: str | None = None) -> ApiKey | None:
        keys = self._durable(KEYS_COLLECTION)
        query = {"_id": key_id} if tenant is None else {"_id": key_id, "tenantId": tenant}
        doc = await self._call(lambda: keys.find_one(query), "get_key", read=True)
        return None if doc is None else document_to_key(doc)

    async def list_keys(self, tenant_id: str | None) -> list[ApiKey]:
        keys = self._durable(KEYS_COLLECTION)
        query: Document = {} if tenant_id is None else {"tenantId": tenant_id}
        sort = [("createdAt", ASCENDING), ("_id", ASCENDING)]

        def op() -> list[ApiKey]:
            return [document_to_key(d) for d in keys.find(query, sort=sort)]

        return await self._call(op, "list_keys", read=True)

    async def revoke_key(self, key_id: str, now: datetime) -> ApiKey | None:
        keys = self._durable(KEYS_COLLECTION)

        def op() -> ApiKey | None:
            doc = keys.find_one_and_update(
                {"_id": key_id, "revokedAt": None},
                {"$set": {"revokedAt": utc(now)}},
                return_document=ReturnDocument.AFTER,
            )
            if doc is None:
                doc = keys.find_one({"_id": key_id})
            return None if doc is None else document_to_key(doc)

        return await self._call(op, "revoke_key")

    async def append_audit(self, record: AuditRecord) -> None:
        await self._call(lambda: self._insert_audit(record), "append_audit")

    def _insert_audit(self, record: AuditRecord) -> None:
        """Insert ``record`` (blocking; in the caller's thread)."""
        # A duplicate is a retried insert whose first attempt landed.
        with contextlib.suppress(DuplicateKeyError):
            self._durable(AUDIT_COLLECTION).insert_one(audit_to_document(record))

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        audit = self._durable(AUDIT_COLLECTION)
        filt = audit_filter(query)

        def op() -> list[AuditRecord]:
            cursor = audit.find(filt, sort=[("_id", DESCENDING)], limit=query.limit)
            return [document_to_audit(d) for d in cursor]

        return await self._call(op, "list_audit", read=True)

    async def prune_audit(self, before: datetime, limit: int) -> int:
        audit = self._durable(AUDIT_COLLECTION)

        def op() -> int:
            ids = [
                d["_id"]
                for d in audit.find(
                    {"at": {"$lt": utc(before)}}, projection={"_id": 1}, limit=limit
                )
            ]
            if not ids:
                return 0
            return audit.delete_many({"_id": {"$in": ids}}).deleted_count

        return await self._call(op, "prune_audit")
