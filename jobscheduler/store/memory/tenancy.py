"""The memory store's tenancy: API keys and the audit trail."""

from __future__ import annotations

from datetime import datetime

import attrs

from jobscheduler.domain.audit import AuditQuery, AuditRecord
from jobscheduler.domain.keys import ApiKey
from jobscheduler.domain.model import utc

from .codec import insert_new
from .conn import MemoryConnection


class AuditTrail:
    """Append-only audit records by id (ids are ObjectIds: they sort by creation time).
    A second record with an id already stored is refused with StoreError, like a primary
    key."""

    def __init__(self) -> None:
        self._records: dict[str, AuditRecord] = {}

    def append(self, record: AuditRecord) -> None:
        insert_new(self._records, record.id, record, "audit record")

    def select(self, query: AuditQuery) -> list[AuditRecord]:
        """What ``query`` selects, newest id first, at most ``query.limit``."""
        found = [record for record in self._records.values() if query.matches(record)]
        found.sort(key=lambda record: record.id, reverse=True)
        return found[: query.limit]

    def prune(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` records older than ``before`` (oldest ids first)."""
        cutoff = utc(before)
        old = sorted(rid for rid, record in self._records.items() if record.at < cutoff)
        for record_id in old[:limit]:
            del self._records[record_id]
        return min(len(old), limit)


class MemoryTenancyMixin(MemoryConnection):
    """API keys and the audit trail beside the jobs."""

    def __init__(self) -> None:
        super().__init__()
        self._keys: dict[str, ApiKey] = {}
        self._audit = AuditTrail()

    async def insert_key(self, key: ApiKey) -> ApiKey:
        await self._enter()
        return insert_new(self._keys, key.id, key, "key")

    async def get_key(self, key_id: str, *, tenant: str | None = None) -> ApiKey | None:
        await self._enter()
        key = self._keys.get(key_id)
        return key if key is not None and (tenant is None or key.tenant == tenant) else None

    async def list_keys(self, tenant_id: str | None) -> list[ApiKey]:
        await self._enter()
        keys = [k for k in self._keys.values() if tenant_id is None or k.tenant == tenant_id]
        return sorted(keys, key=lambda k: (k.created_at, k.id))

    async def revoke_key(self, key_id: str, now: datetime) -> ApiKey | None:
        await self._enter()
        key = self._keys.get(key_id)
        if key is not None and key.revoked_at is None:
            self._keys[key_id] = key = attrs.evolve(key, revoked_at=utc(now))
        return key

    async def append_audit(self, record: AuditRecord) -> None:
        await self._enter()
        self._audit.append(record)

    async def list_audit(self, query: AuditQuery) -> list[AuditRecord]:
        await self._enter()
        return self._audit.select(query)

    async def prune_audit(self, before: datetime, limit: int) -> int:
        await self._enter()
        return self._audit.prune(before, limit)
