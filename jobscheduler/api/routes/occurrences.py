"""``GET /jobs/{id}/occurrences``: a cron template's ledger, newest fire time first.

Each item is one fire time and what became of it (``spawned``/``buffered`` with the run's id,
or ``skipped`` with a reason); a run's outcome is read at request time from the run itself
(``run.status``), so the ledger never changes after it is written. Pages are at most
``limit`` items (default 50, at most 500); the next page is ``cursor=<nextCursor>``, also
given as a ``Link: <...>; rel="next"`` header. Another tenant's template is a 404, exactly
like a template that does not exist.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import trio
from quart import Response, request

from jobscheduler.api.auth import current_principal
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.schemas.admin import (
    DEFAULT_OCCURRENCE_LIMIT,
    MAX_OCCURRENCE_LIMIT,
    OCCURRENCES,
)
from jobscheduler.domain.cron import Occurrence, OccurrenceStatus
from jobscheduler.domain.model import Job, cron_policy_of, format_time
from jobscheduler.domain.validation import parse_limit
from jobscheduler.errors import JobNotFound, ValidationError
from jobscheduler.roles.deps import Deps
from jobscheduler.store.jobs import OccurrenceQuery

from .jobs import parse_job_id, visible_job

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CURSOR_PREFIX = "f:"
#: Runs of one page read from the store at once.
_RUN_READS = 8


def encode_cursor(fire_at: datetime) -> str:
    """The opaque cursor after the item whose fire time is ``fire_at``."""
    millis = (fire_at - _EPOCH) // timedelta(milliseconds=1)
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{millis}".encode()).decode().rstrip("=")


def decode_cursor(text: str) -> datetime:
    """The fire time a cursor stands for; ValidationError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
        if not raw.startswith(_CURSOR_PREFIX):
            raise ValueError(raw)
        return _EPOCH + timedelta(milliseconds=int(raw[len(_CURSOR_PREFIX) :]))
    except (ValueError, binascii.Error, UnicodeDecodeError, OverflowError):
        raise ValidationError("cursor: not a cursor this endpoint returned") from None


def parse_occurrence_query(args: Mapping[str, str]) -> tuple[int, datetime | None]:
    """``limit`` (1..MAX_OCCURRENCE_LIMIT) and ``cursor`` of the query string."""
    limit = parse_limit(
        args.get("limit"), default=DEFAULT_OCCURRENCE_LIMIT, maximum=MAX_OCCURRENCE_LIMIT
    )
    cursor = args.get("cursor")
    return limit, None if cursor is None else decode_cursor(cursor)


def occurrence_to_json(
    record: Occurrence, template: Job, run: Job | None, run_missing: bool
) -> dict[str, Any]:
    """One ledger item: the fire time (UTC and the template's zone), its status, and for a
    run its id, when it was spawned, how late, and its current status."""
    out: dict[str, Any] = {
        "fireAt": format_time(record.fire_at),
        "fireAtLocal": cron_policy_of(template).local(record.fire_at).isoformat(),
        "status": record.status.value,
    }
    if record.reason is not None:
        out["reason"] = record.reason.value
    if record.run_id is None:
        return out
    out["runId"] = record.run_id
    if record.cancelled_run_id is not None:
        out["cancelledRunId"] = record.cancelled_run_id
    spawned_at: datetime | None = None
    if record.status is OccurrenceStatus.SPAWNED:
        spawned_at = record.recorded_at
    elif run is not None:  # a buffered fire time is spawned when its run is created
        spawned_at = run.created_at
    if spawned_at is not None:
        out["spawnedAt"] = format_time(spawned_at)
        late = max(spawned_at - record.fire_at, timedelta(0))
        out["lateSeconds"] = round(late.total_seconds(), 3)
    if run is not None:
        out["run"] = {"status": run.status.value, "attempts": run.attempts}
        if run.last_error is not None:
            out["run"]["lastError"] = run.last_error
    elif run_missing and record.status is OccurrenceStatus.SPAWNED:
        out["run"] = None  # deleted since
    return out


async def _runs(
    deps: Deps, records: list[Occurrence], calls: BoundedCalls, tenant: str | None
) -> dict[str, Job | None]:
    """The runs the records name, read as ``tenant`` (None for one that does not exist)."""
    ids = sorted({r.run_id for r in records if r.run_id is not None})
    found: dict[str, Job | None] = {}
    limiter = trio.CapacityLimiter(_RUN_READS)

    async def read(run_id: str) -> None:
        async with limiter:
            try:
                found[run_id] = await calls.call(deps.store.get, run_id, tenant=tenant)
            except JobNotFound:
                found[run_id] = None

    async with trio.open_nursery() as nursery:
        for run_id in ids:
            nursery.start_soon(read, run_id)
    return found


def register_occurrence_routes(routes: RouteTable, deps: Deps, calls: BoundedCalls) -> None:
    """Add ``GET /jobs/{id}/occurrences`` to ``routes``; ``calls`` bounds its store reads
    by API_STORE_TIMEOUT (see bounded.py)."""

    @routes.route(OCCURRENCES)
    async def occurrences(job_id: str) -> Response:
        parse_job_id(job_id)
        limit, before = parse_occurrence_query(request.args)
        template = await visible_job(deps, calls, job_id)
        tenant = current_principal().tenant
        if template.cron is None:
            raise ValidationError(f"job {template.id} is not a cron template")
        wanted = OccurrenceQuery(template.id, before=before, tenant=tenant)
        records = await calls.call(deps.store.occurrences, wanted, limit=limit + 1)
        more = len(records) > limit
        records = records[:limit]
        runs = await _runs(deps, records, calls, tenant)
        items = [
            occurrence_to_json(
                r,
                template,
                runs.get(r.run_id) if r.run_id else None,
                r.run_id is not None and runs.get(r.run_id) is None,
            )
            for r in records
        ]
        body: dict[str, Any] = {"id": template.id, "occurrences": items}
        response_headers: dict[str, str] = {}
        if more:
            cursor = encode_cursor(records[-1].fire_at)
            body["nextCursor"] = cursor
            query = urlencode({"limit": limit, "cursor": cursor})
            response_headers["Link"] = f'<{request.path}?{query}>; rel="next"'
        response = json_response(body, 200)
        response.headers.update(response_headers)
        return response
