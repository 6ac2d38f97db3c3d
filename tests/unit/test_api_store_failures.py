"""A failing store behind the API: a store error is a 503 whose message leaks nothing of the
store (no host, no password), and an unexpected exception is a bare 500 ``internal error``;
for a create, a get and a list alike.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from jobscheduler.domain.audit import AuditRecord
from jobscheduler.domain.model import Job
from jobscheduler.errors import StoreError
from jobscheduler.store import JobStore
from jobscheduler.store.query import Cursor, JobQuery

from .api_support import JSON, api_deps, create_body, serve
from .conftest import DepsFactory, ProxyStore

#: A store error whose text must never reach a client (it names a host and a password).
UNREACHABLE = "connection refused: mongodb://10.0.0.5:27017 (password=hunter2)"


class UnavailableStore(ProxyStore):
    """Every call fails as an unreachable database would."""

    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        await trio.lowlevel.checkpoint()
        raise StoreError(UNREACHABLE)

    async def get(self, job_id: str, *, tenant: str | None = None) -> Job:
        await trio.lowlevel.checkpoint()
        raise StoreError(UNREACHABLE)

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        await trio.lowlevel.checkpoint()
        raise StoreError(UNREACHABLE)


class BrokenStore(ProxyStore):
    """Every call hits a programming error inside the adapter."""

    async def insert(self, job: Job, *, audit: AuditRecord | None = None) -> Job:
        await trio.lowlevel.checkpoint()
        raise KeyError("secret_column")

    async def get(self, job_id: str, *, tenant: str | None = None) -> Job:
        await trio.lowlevel.checkpoint()
        raise ZeroDivisionError("secret detail")

    async def find_jobs(
        self, query: JobQuery, limit: int, after: Cursor | None = None
    ) -> list[Job]:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("secret detail")


REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/jobs", {"json": create_body()}),
    ("GET", f"/jobs/{'a' * 24}", {}),
    ("GET", "/jobs", {"query_string": {"tenantId": "tenant-a"}}),
]


@pytest.mark.parametrize(("method", "path", "kwargs"), REQUESTS, ids=["create", "get", "list"])
async def test_store_error_is_503_json_without_internals(
    make_deps: DepsFactory,
    store: JobStore,
    method: str,
    path: str,
    kwargs: dict[str, Any],
) -> None:
    async with serve(api_deps(make_deps, UnavailableStore(store))) as api:
        reply = await api.request(method, path, **kwargs)
    message = reply.assert_error(503)
    assert "hunter2" not in message
    assert "mongodb://" not in message


@pytest.mark.parametrize(("method", "path", "kwargs"), REQUESTS, ids=["create", "get", "list"])
async def test_unexpected_exception_is_500_internal_error(
    make_deps: DepsFactory,
    store: JobStore,
    method: str,
    path: str,
    kwargs: dict[str, Any],
) -> None:
    async with serve(api_deps(make_deps, BrokenStore(store))) as api:
        reply = await api.request(method, path, **kwargs)
    assert reply.status == 500
    assert reply.content_type == JSON
    assert reply.json == {"error": "internal error"}
