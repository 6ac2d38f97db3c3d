"""A store's lifetime around a block, for the fixtures and tests that open one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

from jobscheduler.store import JobStore

S = TypeVar("S", bound=JobStore)


@asynccontextmanager
async def started(store: S) -> AsyncIterator[S]:
    """``store``, started for the block and closed after it (whatever the block raised)."""
    await store.start()
    try:
        yield store
    finally:
        await store.close()
