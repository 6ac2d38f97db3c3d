"""The flow-control tests' ``mail`` type: a handler registry with its limits, deps whose
claims are small, and its jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobscheduler.domain.model import Job
from jobscheduler.handlers import HandlerRegistry, JobContext, default_registry
from jobscheduler.roles.deps import Deps

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
