"""``SYNC_SCHEDULES=1``: a scheduler started with ``--app`` makes the store's templates match
the app's schedules once at start (:mod:`jobscheduler.handlers.sync`, over the HTTP API at
``JOBSCHEDULER_URL`` with ``JOBSCHEDULER_API_KEY``; ``dev`` uses its own API).

The API may come up after the scheduler: an unreachable API (or a 503) is tried again for
:data:`SYNC_PATIENCE`. Any failure is logged and the scheduler runs on: schedules are the
deploy's business, dispatching is the scheduler's.
"""

from __future__ import annotations

import logging

import trio

from jobscheduler.client import AsyncClient
from jobscheduler.config import ClientSettings
from jobscheduler.errors import ApiUnreachable, JobSchedulerError, ServiceUnavailable
from jobscheduler.handlers import HandlerRegistry
from jobscheduler.handlers.sync import app_name, sync_schedules

log = logging.getLogger(__name__)

#: How long an unreachable (or unavailable) API is waited for.
SYNC_PATIENCE = 60.0
SYNC_RETRY_DELAY = 1.0


async def sync_at_start(registry: HandlerRegistry, app: str, url: str | None = None) -> None:
    """Sync ``registry``'s schedules as app ``app`` through the API at ``url`` (default:
    ``JOBSCHEDULER_URL``); log what changed, the conflicts, or why it failed."""
    settings = ClientSettings.from_env()
    name = app_name(app)
    deadline = trio.current_time() + SYNC_PATIENCE
    while True:
        try:
            async with AsyncClient(url or settings.url, api_key=settings.api_key) as client:
                report = await sync_schedules(
                    client, registry, app=name, default_tenant=settings.tenant_id
                )
        except (ApiUnreachable, ServiceUnavailable) as exc:
            if trio.current_time() + SYNC_RETRY_DELAY > deadline:
                log.error(
                    "schedules not synced: API unavailable", extra={"app": name, "error": str(exc)}
                )
                return
            await trio.sleep(SYNC_RETRY_DELAY)
            continue
        except JobSchedulerError as exc:
            log.error("schedules not synced", extra={"app": name, "error": str(exc)})
            return
        break
    for line in report.lines():
        level = logging.WARNING if line.startswith("!") or "FAILED" in line else logging.INFO
        log.log(level, "schedules sync: %s", line, extra={"app": name})
