"""Declarations of the figures: ``GET /stats`` (counts, queue lag, recent outcomes) and
``GET /stats/overview`` (what the dashboard's Overview shows), in the same terms as
:mod:`.jobs`."""

from __future__ import annotations

from jobscheduler.api.route_table import Reply
from jobscheduler.api.shapes import TIME, Schema, array_of
from jobscheduler.domain.keys import Role

from ._common import TENANT_PARAM, Operations, reply_object
from .flow import HOLD

STATS: Schema = reply_object(
    required=["byStatus", "byJobType", "queueLagSeconds", "finished"],
    properties={
        "tenantId": {"type": ["string", "null"]},
        "at": TIME,
        "byStatus": {"type": "object", "additionalProperties": {"type": "integer"}},
        "byJobType": {"type": "object", "additionalProperties": {"type": "integer"}},
        "counts": {"type": "object"},
        "queueLagSeconds": {"type": "number", "minimum": 0},
        "oldestDueAt": TIME,
        "finished": {"type": "object"},
    },
)

#: The figures (``/stats`` + ``path``): for readers, with the tenant filter.
stats_operation = Operations(prefix="/stats", tag="jobs", role=Role.READER, params=(TENANT_PARAM,))

STATS_OP = stats_operation(
    "stats",
    "GET",
    "Counts by status and job type, queue lag, recent completions and failures",
    responses={200: Reply("the figures", STATS)},
)

_COUNT: Schema = {"type": "integer", "minimum": 0}
_WORKER: Schema = reply_object(
    required=["id", "role", "host", "pid", "jobTypes", "inFlight", "leader", "seenAt"],
    properties={
        "id": {"type": "string"},
        "role": {"enum": ["scheduler", "executor"]},
        "host": {"type": "string"},
        "pid": {"type": "integer"},
        "jobTypes": array_of({"type": "string"}),
        "inFlight": _COUNT,
        "leader": {"type": "boolean"},
        "startedAt": TIME,
        "seenAt": TIME,
        "secondsSinceSeen": {"type": "number", "minimum": 0},
    },
)
_SERIES: Schema = array_of(_COUNT)

OVERVIEW: Schema = reply_object(
    required=["byStatus", "total", "dlq", "queueLagSeconds", "throughput", "cluster"],
    properties={
        "tenantId": {"type": ["string", "null"]},
        "at": TIME,
        "byStatus": {"type": "object", "additionalProperties": _COUNT},
        "total": _COUNT,
        "dlq": _COUNT,
        "queueLagSeconds": {"type": "number", "minimum": 0},
        "oldestDueAt": {"type": ["string", "null"], "format": "date-time"},
        "throughput": reply_object(
            required=["start", "minutes", "completed", "failed"],
            properties={
                "start": TIME,
                "minutes": _COUNT,
                "completed": _SERIES,
                "failed": _SERIES,
            },
        ),
        "retention": {
            "type": "object",
            "description": "the default retention per status and the reaper's last prune",
            "properties": {
                "defaults": {"type": "object", "additionalProperties": {"type": "string"}},
                "lastPrune": {"type": ["object", "null"]},
            },
        },
        "held": {
            "type": "object",
            "description": "the busiest scopes the scheduler leader's latest claims held back "
            "(flow control), of the tenant in scope; empty when nothing is held",
            "required": ["holds"],
            "properties": {
                "at": {**TIME, "description": "when the leader wrote its report"},
                "holds": array_of(HOLD),
            },
        },
        "cluster": {
            "type": ["object", "null"],
            "description": "null for a tenant-bound key",
            "properties": {
                "leader": {"oneOf": [_WORKER, {"type": "null"}]},
                "leaders": _COUNT,
                "schedulers": array_of(_WORKER),
                "executors": array_of(_WORKER),
            },
        },
    },
)

OVERVIEW_OP = stats_operation(
    "overview",
    "GET",
    "The dashboard's Overview: counts by status, queue lag, jobs finished per minute "
    "over the last hour, the leader and the live executors",
    path="/overview",
    responses={200: Reply("the figures", OVERVIEW)},
)
