"""Store adapters under contract test: every adapter runs the same test bodies.

The ``memory`` adapter (:class:`~jobscheduler.store.memory.MemoryJobStore`) and the
``sqlite`` one run everywhere. The ``mongo`` adapter needs a MongoDB-protocol server at
``MONGO_URI`` (default ``mongodb://127.0.0.1:27017``; ``scripts/deps.sh up`` starts
FerretDB there). It is marked ``integration``; when the server is unreachable its tests
fail (StoreError), never skip. Each test gets its own database, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pymongo
import pytest
import trio

from jobscheduler.store import JobStore
from jobscheduler.store.memory import MemoryJobStore
from jobscheduler.store.mongo import MongoJobStore
from jobscheduler.store.sqlite import SQLiteJobStore
from tests.support.stores import started

DEFAULT_MONGO_URI = "mongodb://127.0.0.1:27017"


def mongo_uri() -> str:
    """The MongoDB-protocol server the integration tests use."""
    return os.environ.get("MONGO_URI") or DEFAULT_MONGO_URI


def unique_database_name(prefix: str = "js_test") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


async def drop_database(uri: str, name: str) -> None:
    """Drop a test database with a short-lived client of its own."""

    def drop() -> None:
        client: pymongo.MongoClient[dict[str, object]] = pymongo.MongoClient(
            uri, serverSelectionTimeoutMS=5000
        )
        try:
            client.drop_database(name)
        finally:
            client.close()

    await trio.to_thread.run_sync(drop)


async def _memory(tmp_path: Path) -> AsyncIterator[JobStore]:
    async with started(MemoryJobStore()) as store:
        yield store


async def _sqlite(tmp_path: Path) -> AsyncIterator[JobStore]:
    async with started(SQLiteJobStore(tmp_path / "jobs.db")) as store:
        yield store


async def _mongo(tmp_path: Path) -> AsyncIterator[JobStore]:
    uri, database = mongo_uri(), unique_database_name()
    store = MongoJobStore(uri, database, server_selection_timeout=5.0)
    await store.start()
    try:
        yield store
    finally:
        await store.close()
        await drop_database(uri, database)


ADAPTERS: dict[str, Callable[[Path], AsyncIterator[JobStore]]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "mongo": _mongo,
}
ADAPTER_PARAMS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("mongo", id="mongo", marks=pytest.mark.integration),
]
