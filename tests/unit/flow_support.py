"""The flow-control tests' ``mail`` type: a handler registry with its limits, deps whose
claims are small, and its jobs; and a count of a store method's calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobscheduler.domain.model import Job
from jobscheduler.handlers import HandlerRegistry, JobContext, default_registry
from jobscheduler.roles.deps import Deps
from jobscheduler.store import JobStore

from .conftest import DepsFactory, make_job, make_settings


async def _mail(ctx: JobContext) -> None:
    return None


def registry(**limits: Any) -> HandlerRegistry:
    """The built-ins and a ``mail`` type with these flow-control options."""
    handlers = default_registry()
    handlers.register("mail", _mail, **limits)
    return handlers


def flow_deps(make_deps: DepsFactory, tmp_path: Path, **limits: Any) -> Deps:
    settings = make_settings(tmp_path, claim_batch=10)
    return make_deps(registry=registry(**limits), settings=settings)


def mail(tenant: str = "a", **kwargs: Any) -> Job:
    return make_job(job_type="mail", tenant=tenant, **kwargs)


class Calls:
    """How many times a store method was called since it was counted (or ``count`` was
    set again)."""

    def __init__(self) -> None:
        self.count = 0


def count_calls(monkeypatch: pytest.MonkeyPatch, store: JobStore, name: str) -> Calls:
    """Count the calls of ``store``'s method ``name`` (which still answers as before)."""
    calls = Calls()
    method = getattr(store, name)

    async def counting(*args: Any, **kwargs: Any) -> Any:
        calls.count += 1
        return await method(*args, **kwargs)

    monkeypatch.setattr(store, name, counting)
    return calls
