"""Helpers of the tenancy tests: an app with ``AUTH=required`` and keys of several tenants."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
from werkzeug.datastructures import Headers

from jobscheduler.api import create_app
from jobscheduler.clock import ManualClock
from jobscheduler.domain.keys import Role, new_key
from jobscheduler.domain.model import new_job_id
from jobscheduler.roles.deps import Deps

from .api_support import Reply
from .conftest import BASE, DepsFactory


@attrs.define
class AuthApi:
    """An app under test plus tokens by name (``admin`` is an all-tenant admin)."""

    deps: Deps
    client: Any
    app: Any
    tokens: dict[str, str] = attrs.field(factory=dict)
    key_ids: dict[str, str] = attrs.field(factory=dict)

    async def add_key(self, name: str, tenant: str | None, role: Role) -> str:
        record, token = new_key(tenant=tenant, role=role, name=name, now=BASE)
        await self.deps.store.insert_key(record)
        self.tokens[name], self.key_ids[name] = token, record.id
        return token

    async def call(
        self,
        method: str,
        path: str,
        *,
        as_: str | None = None,
        headers: dict[str, str] | list[tuple[str, str]] | None = None,
        **kwargs: Any,
    ) -> Reply:
        sent: list[tuple[str, str]] = list(
            headers.items() if isinstance(headers, dict) else headers or []
        )
        if as_ is not None:
            sent.append(("Authorization", f"Bearer {self.tokens[as_]}"))
        response = await self.client.open(path, method=method, headers=Headers(sent), **kwargs)
        return await Reply.read(response)


def auth_deps(make_deps: DepsFactory, **settings: Any) -> Deps:
    base = make_deps.settings
    return make_deps(
        settings=attrs.evolve(base, auth="required", **settings), clock=ManualClock(BASE)
    )


@asynccontextmanager
async def serve_auth(deps: Deps) -> AsyncIterator[AuthApi]:
    """The app on ``deps`` with keys: ``admin`` (every tenant), and per tenant ``a``/``b``:
    ``<t>-admin``, ``<t>-writer``, ``<t>-reader``."""
    app = create_app(deps)
    async with app.test_app() as test_app:
        api = AuthApi(deps=deps, client=test_app.test_client(), app=app)
        await api.add_key("admin", None, Role.ADMIN)
        for tenant in ("a", "b"):
            for role in Role:
                await api.add_key(f"{tenant}-{role.value}", f"tenant-{tenant}", role)
        yield api


@pytest.fixture(name="api")
async def auth_api(make_deps: DepsFactory) -> AsyncIterator[AuthApi]:
    """The ``api`` of a test module that imports it (in place of the unit conftest's): the
    app of :func:`serve_auth` on :func:`auth_deps`."""
    async with serve_auth(auth_deps(make_deps)) as served:
        yield served


def body(tenant: str | None = "tenant-a", **fields: Any) -> dict[str, Any]:
    """A ``POST /jobs`` body of ``tenant`` (None: the body names no tenant)."""
    out: dict[str, Any] = {
        "idempotencyKey": f"k-{new_job_id()}",
        "jobType": "noop",
        "scheduledAt": "2026-01-01T00:00:00Z",
    }
    if tenant is not None:
        out["tenantId"] = tenant
    out.update(fields)
    return out
