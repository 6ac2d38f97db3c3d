"""The harness of the HTTP contract tests (``test_api_*``): the app under test through
quart-trio's in-process test client, and the contract's example create request.

Successful responses are the raw resource; every error is ``{"error": "..."}`` with the
matching status and a JSON content type (:meth:`Reply.assert_error`). :func:`api_deps`
builds the app on a ManualClock at BASE, so times in responses are exact. The ``api``
fixture of ``conftest.py`` serves the app both ways ``POST /jobs`` can take (``[fast]`` and
``[quart]``); a test module that imports :func:`fast_api` gets the app served once, the fast
way, as its ``api`` instead.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any, cast

import attrs
import pytest
from werkzeug.datastructures import Headers

from jobscheduler.api import create_app
from jobscheduler.api.app import tenancy_of
from jobscheduler.api.routes.create import FastCreate
from jobscheduler.clock import ManualClock
from jobscheduler.domain.keys import Role, new_key
from jobscheduler.roles.deps import Deps
from jobscheduler.store import JobStore

from .conftest import BASE, DepsFactory, make_job

JSON = "application/json"


def create_body(**overrides: Any) -> dict[str, Any]:
    """The contract's example create request; ``None`` values remove a field."""
    body: dict[str, Any] = {
        "idempotencyKey": "test-job-1",
        "tenantId": "tenant-a",
        "jobType": "log-message",
        "payload": {"message": "hello from the scheduler"},
        "priority": 5,
        "scheduledAt": "2026-09-29T18:00:00Z",
        "maxAttempts": 3,
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


async def jobs_in_every_sort(store: JobStore) -> dict[str, list[str]]:
    """Five jobs of tenant-a stored, created a second apart and due in an order of their own:
    their ids in the order of each sort of the listing (``-createdAt`` is the default)."""
    jobs = [
        await store.insert(
            make_job(
                created_at=BASE + timedelta(seconds=i),
                scheduled_at=BASE + timedelta(minutes=(i * 7) % 5),
            )
        )
        for i in range(5)
    ]
    newest = [j.id for j in sorted(jobs, key=lambda j: j.created_at, reverse=True)]
    due = [j.id for j in sorted(jobs, key=lambda j: (j.scheduled_at, j.id))]
    return {
        "-createdAt": newest,
        "createdAt": newest[::-1],
        "scheduledAt": due,
        "-scheduledAt": due[::-1],
    }


@attrs.define
class Reply:
    """A response of the app under test, read in full."""

    status: int
    headers: Headers
    text: str

    @classmethod
    async def read(cls, response: Any) -> Reply:
        """The reply of a test client's ``response``."""
        return cls(
            status=response.status_code,
            headers=Headers(response.headers),
            text=await response.get_data(as_text=True),
        )

    @property
    def content_type(self) -> str | None:
        return self.headers.get("Content-Type")

    @property
    def json(self) -> Any:
        return json.loads(self.text)

    def assert_error(self, status: int, fragment: str = "") -> str:
        """Assert a contract error response; returns its message."""
        assert self.status == status, self.text
        assert self.content_type == JSON
        body = self.json
        assert isinstance(body, dict)
        assert list(body) == ["error"]
        assert isinstance(body["error"], str)
        assert body["error"]
        assert fragment in body["error"]
        return str(body["error"])

    def assert_conflict(self, status: int, fragment: str = "") -> str:
        """Assert a 409 naming what forbids the action (``{"error", "jobId", "status"}``)."""
        assert self.status == status, self.text
        body = self.json
        assert set(body) == {"error", "jobId", "status"}
        assert fragment in body["error"]
        return str(body["error"])


@attrs.define
class Api:
    """The app under test and the deps it was built on."""

    deps: Deps
    client: Any
    #: The API key sent with every request (the app runs with AUTH=required).
    token: str = ""

    async def request(self, method: str, path: str, **kwargs: Any) -> Reply:
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        response = await self.client.open(path, method=method, headers=headers, **kwargs)
        return await Reply.read(response)

    async def create(self, body: Any) -> Reply:
        return await self.request("POST", "/jobs", json=body)

    async def get(self, path: str, **query: str) -> Reply:
        return await self.request("GET", path, query_string=query or None)


@asynccontextmanager
async def serve(deps: Deps, way: str = "fast") -> AsyncIterator[Api]:
    """The app on ``deps`` with AUTH=required, called with an admin key of every tenant.

    ``way`` is how ``POST /jobs`` is served: ``fast``, the key already cached so a create
    that succeeds takes the fast path (api/create.py) and any other goes on to Quart, or
    ``quart``, the app without its fast path (every create through Quart's route)."""
    deps = attrs.evolve(deps, settings=attrs.evolve(deps.settings, auth="required"))
    app = create_app(deps)
    if way == "quart":
        app.asgi_app = cast(FastCreate, app.asgi_app).app  # type: ignore[method-assign,assignment]
    async with app.test_app() as test_app:
        key, token = new_key(tenant=None, role=Role.ADMIN, name="test", now=BASE)
        await deps.store.insert_key(key)
        if way == "fast":
            await tenancy_of(app).authenticator.authenticate([f"Bearer {token}"])
        yield Api(deps=deps, client=test_app.test_client(), token=token)


def api_deps(make_deps: DepsFactory, store: JobStore | None = None) -> Deps:
    return make_deps(store=store, clock=ManualClock(BASE))


@pytest.fixture(name="api")
async def fast_api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(api_deps(make_deps)) as served:
        yield served


async def post(api: Api, path: str, body: Any = None) -> Any:
    return await api.request("POST", path, **({} if body is None else {"json": body}))
