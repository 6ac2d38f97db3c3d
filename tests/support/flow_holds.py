"""A flow report's hold for the tests of flow control (the store contract, the API)."""

from __future__ import annotations

from jobscheduler.domain.flow import Hold, HoldReason, key_scope


def key_hold(tenant_id: str, key: str, *, waiting: int, scope: str | None = None) -> Hold:
    """The hold of ``mail`` jobs waiting on concurrency key ``key`` (1 of 1 running) in
    ``tenant_id``; its scope is the key's (``key_scope``) unless given."""
    return Hold(
        scope=scope or key_scope(tenant_id, "mail", key),
        reason=HoldReason.CONCURRENCY,
        tenant_id=tenant_id,
        job_type="mail",
        key=key,
        text=f"waiting: {key} has 1 of 1 running",
        waiting=waiting,
    )
