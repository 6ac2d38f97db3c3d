"""API keys for a store under test: an all-tenant admin key, made before the servers start."""

from __future__ import annotations

from datetime import UTC, datetime

from jobscheduler.domain.keys import Role, new_key
from jobscheduler.store import JobStore


async def insert_admin_key(store: JobStore, name: str) -> str:
    """Start ``store``, put an all-tenant admin key named ``name`` in it, close it; returns
    the key's token (what a client sends as ``Authorization: Bearer <token>``)."""
    record, token = new_key(tenant=None, role=Role.ADMIN, name=name, now=datetime.now(UTC))
    await store.start()
    try:
        await store.insert_key(record)
    finally:
        await store.close()
    return token
