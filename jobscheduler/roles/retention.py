"""Retention in the roles: the executors publish their handlers' ``retention=`` options to
the store (so a reaper started without the app prunes by them), and the rules the reaper
prunes by are read back from it (:class:`~jobscheduler.domain.retention.Rules`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta

import trio

from jobscheduler.config import Settings
from jobscheduler.domain.model import Status
from jobscheduler.domain.retention import Keep, Override, Rules, Scope
from jobscheduler.errors import StoreError

from .deps import Deps

log = logging.getLogger(__name__)

#: Longest the publication of one executor's job types may take at its start.
PUBLISH_TIMEOUT = 5.0


def default_keep(settings: Settings) -> Keep:
    """The retention of each prunable status when nothing overrides it (``RETENTION_*``)."""
    return {
        Status.COMPLETED: settings.retention_completed,
        Status.CANCELLED: settings.retention_cancelled,
        Status.DLQ: settings.retention_dlq,
    }


async def current_rules(deps: Deps) -> Rules:
    """The defaults and every override the store holds (StoreError if it cannot say)."""
    overrides = await deps.store.retention_overrides()
    return Rules.of(default_keep(deps.settings), overrides)


async def prune_older_than(
    deps: Deps, retention: float, prune: Callable[[datetime], Awaitable[int]], what: str
) -> None:
    """Delete ``what`` older than ``retention`` seconds through ``prune`` (a store method
    taking the cutoff). A failure is only logged: the next pass tries again."""
    cutoff = deps.clock.now() - timedelta(seconds=retention)
    try:
        pruned = await prune(cutoff)
    except StoreError as exc:
        log.warning(f"{what} not pruned", extra={"error": str(exc)})
        return
    if pruned:
        log.info(f"pruned old {what}", extra={"records": pruned})


async def publish_type_retention(deps: Deps, job_types: Sequence[str]) -> None:
    """Store each job type's ``retention=`` option as its override (a type without one has
    its override deleted), bounded by PUBLISH_TIMEOUT. A failure is logged: the executor
    runs on, and its next start publishes again."""
    now = deps.clock.now()
    with trio.move_on_after(PUBLISH_TIMEOUT) as scope:
        try:
            for job_type in job_types:
                keep = dict(deps.registry.get(job_type).retention)
                await deps.store.set_retention(
                    Override(scope=Scope.JOB_TYPE, name=job_type, keep=keep, updated_at=now)
                )
        except StoreError as exc:
            log.warning("job types' retention not published", extra={"error": str(exc)})
    if scope.cancelled_caught:
        log.warning("job types' retention not published: the store did not answer in time")


__all__ = ["current_rules", "default_keep", "publish_type_retention"]
