"""The cron preview routes: the next fire times of a template, and of any expression.

- ``GET /jobs/{id}/next?count=N``: a stored template's next N fire times, starting with the
  one it is waiting for (400 for a job that is not a template, 404 for an unknown id);
- ``POST /cron/preview`` ``{cron, timezone, count, from, dstGap, dstFold}``: stateless.

Each fire time is shown in UTC (``at``) and in the zone (``local``), with ``shifted`` (a DST
gap moved it; ``wallTime`` is the wall time it stood for) and ``repeated`` (its wall time
happens twice that day; ``occurrence`` says which one this is).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from quart import Response, request

from jobscheduler.api.bodies import json_object
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import RouteTable
from jobscheduler.api.schemas import jobs as ops
from jobscheduler.domain import cron
from jobscheduler.domain.model import Status, cron_policy_of, format_time, parse_time
from jobscheduler.errors import ValidationError
from jobscheduler.roles.deps import Deps

from .jobs import parse_job_id, visible_job

log = logging.getLogger(__name__)

DEFAULT_PREVIEW_COUNT = 10
MAX_PREVIEW_COUNT = 100
PREVIEW_FIELDS = frozenset({"cron", "timezone", "count", "from", "dstGap", "dstFold"})


def parse_count(raw: Any, *, query: bool = False) -> int:
    """``count``: an integer in 1..MAX_PREVIEW_COUNT (a JSON number, or text in a query
    string); default 10."""
    if raw is None:
        return DEFAULT_PREVIEW_COUNT
    if query and isinstance(raw, str):
        try:
            raw = int(raw.strip())
        except ValueError:
            raise ValidationError("count: must be an integer") from None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValidationError("count: must be an integer")
    if not 1 <= raw <= MAX_PREVIEW_COUNT:
        raise ValidationError(f"count: must be between 1 and {MAX_PREVIEW_COUNT}")
    return raw


def fire_to_json(
    fire: cron.Fire, policy: cron.CronPolicy, run_at: datetime | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "at": format_time(fire.at),
        "local": policy.local(fire.at).isoformat(),
        "shifted": fire.shifted,
        "repeated": fire.repeated,
    }
    if fire.shifted:
        out["wallTime"] = fire.wall.isoformat(timespec="minutes")
    if fire.repeated:
        out["occurrence"] = "second" if fire.second else "first"
    if run_at is not None:
        out["runAt"] = format_time(run_at)
    return out


def _schedule_json(expression: str, policy: cron.CronPolicy) -> dict[str, Any]:
    return {
        "cron": expression,
        "timezone": policy.timezone,
        "dstGap": policy.dst_gap.value,
        "dstFold": policy.dst_fold.value,
    }


def parse_preview_request(
    body: Any, *, now: datetime
) -> tuple[str, cron.CronPolicy, int, datetime]:
    """Validate a ``POST /cron/preview`` body into (expression, policy, count, from)."""
    body = json_object(body, PREVIEW_FIELDS)
    expression = body.get("cron")
    if not isinstance(expression, str) or not expression.strip():
        raise ValidationError("cron is required (a 5-field expression)")
    expression = cron.validate(expression)
    policy = cron.parse_policy(
        {k: v for k, v in body.items() if k in ("timezone", "dstGap", "dstFold")}, expression
    )
    count = parse_count(body.get("count"))
    start = body.get("from")
    if start is None:
        start = now
    elif isinstance(start, str):
        start = parse_time(start, "from")
    else:
        raise ValidationError("from: must be an RFC3339 string")
    return expression, policy, count, start


def register_cron_routes(routes: RouteTable, deps: Deps, calls: BoundedCalls) -> None:
    """Add the preview routes to ``routes``; ``calls`` bounds their store reads by
    API_STORE_TIMEOUT (see bounded.py)."""

    @routes.route(ops.NEXT)
    async def next_fire_times(job_id: str) -> Response:
        parse_job_id(job_id)
        count = parse_count(request.args.get("count"), query=True)
        template = await visible_job(deps, calls, job_id)
        if template.cron is None:
            raise ValidationError(f"job {template.id} is not a cron template")
        if template.status is not Status.PENDING:
            raise ValidationError(
                f"template {template.id} is {template.status.value}; it no longer fires"
            )
        policy = cron_policy_of(template)
        # Its current fire time first: the walk starts just before it.
        fires = policy.fires(template.cron, template.scheduled_at - timedelta(microseconds=1))
        times = []
        for fire in itertools.islice(fires, count):
            run_at = None
            if policy.jitter:
                run_at = fire.at + cron.jitter_offset(template.id, fire.at, policy.jitter)
            times.append(fire_to_json(fire, policy, run_at))
        return json_response(
            {"id": template.id, **_schedule_json(template.cron, policy), "fireTimes": times}, 200
        )

    @routes.route(ops.PREVIEW_OP)
    async def preview(body: Any) -> Response:
        expression, policy, count, start = parse_preview_request(body, now=deps.clock.now())
        fires = itertools.islice(policy.fires(expression, start), count)
        reply: Mapping[str, Any] = {
            **_schedule_json(expression, policy),
            "from": format_time(start),
            "fireTimes": [fire_to_json(fire, policy) for fire in fires],
        }
        return json_response(reply, 200)
