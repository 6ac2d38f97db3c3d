"""Store adapters under contract test: every adapter runs the same test bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jobscheduler.store import JobStore
from jobscheduler.store.sqlite import SQLiteJobStore


async def _sqlite(tmp_path: Path) -> AsyncIterator[JobStore]:
    store = SQLiteJobStore(tmp_path / "jobs.db")
    await store.start()
    try:
        yield store
    finally:
        await store.close()


ADAPTERS = {
    "sqlite": _sqlite,
}
ADAPTER_PARAMS = [pytest.param("sqlite", id="sqlite")]
