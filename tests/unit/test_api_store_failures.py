"""A failing store behind the API: a store error is a 503 whose message leaks nothing of the
store (no host, no password), and an unexpected exception is a bare 500 ``internal error``;
for a create, a get and a list alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from jobscheduler.domain.audit import AuditRecord
from jobscheduler.domain.model import Job
from jobscheduler.errors import StoreError
from jobscheduler.store import JobStore
from jobscheduler.store.query import Cursor, JobQuery

from .api_support import JSON, Reply, api_deps, create_body, serve
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


#: Sends the request to the API on the test's store behind the given wrapper.
SendTo = Callable[[type[ProxyStore]], Awaitable[Reply]]


@pytest.fixture(
    params=[
        ("POST", "/jobs", {"json": create_body()}),
        ("GET", f"/jobs/{'a' * 24}", {}),
        ("GET", "/jobs", {"query_string": {"tenantId": "tenant-a"}}),
    ],
    ids=["create", "get", "list"],
)
def sent_to(request: pytest.FixtureRequest, make_deps: DepsFactory, store: JobStore) -> SendTo:
    """A create, a get and a list in turn."""
    method, path, kwargs = request.param

    async def send(wrapper: type[ProxyStore]) -> Reply:
        async with serve(api_deps(make_deps, wrapper(store))) as api:
            return await api.request(method, path, **kwargs)

    return send


async def test_store_error_is_503_json_without_internals(sent_to: SendTo) -> None:
    message = (await sent_to(UnavailableStore)).assert_error(503)
    assert "hunter2" not in message
    assert "mongodb://" not in message


async def test_unexpected_exception_is_500_internal_error(sent_to: SendTo) -> None:
    reply = await sent_to(BrokenStore)
    assert reply.status == 500
    assert reply.content_type == JSON
    assert reply.json == {"error": "internal error"}
