"""The JSON Schemas of jobs and the declarations of the job routes (create, read, health and
the document itself), with the helpers the other declarations share.

Request-body schemas here are the ones the routes validate with (see
:mod:`jobscheduler.api.route_table`);
limits and enums come from model.py and the cron package, so a new status or a changed
limit shows up in validation and in ``/openapi.json`` at once. Response schemas describe
what :func:`jobscheduler.domain.model.job_to_json` and the routes write; they stay open to new
fields (``additionalProperties``) so a field added by one change does not break clients.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from jobscheduler.api.route_table import PUBLIC, Operation, Reply
from jobscheduler.api.shapes import (
    JOB_ID,
    STATUS,
    TEXT,
    TIME,
    Schema,
    array_of,
    closed_object,
    nullable,
)
from jobscheduler.domain import cron
from jobscheduler.domain.keys import Role
from jobscheduler.domain.model import MAX_ATTEMPTS_LIMIT, MAX_PRIORITY
from jobscheduler.errors import DuplicateJob, JobNotFound, QuotaExceeded

from ._common import Operations, path_param, query_param, reply_object

DURATION: Schema = {
    "type": ["string", "number", "null"],
    "description": "a duration such as 500ms, 30s, 5m, 1h, or a number of seconds",
}

#: The schedule settings of a cron template (also in a preview request).
SCHEDULE_FIELDS: dict[str, Schema] = {
    "timezone": nullable({"type": "string", "description": "an IANA zone, default UTC"}),
    "dstGap": nullable({"type": "string", "enum": [v.value for v in cron.DstGap]}),
    "dstFold": nullable({"type": "string", "enum": [v.value for v in cron.DstFold]}),
    "catchUp": nullable({"type": "string", "enum": [v.value for v in cron.CatchUp]}),
    "catchUpWindow": DURATION,
    "jitter": DURATION,
    "overlap": nullable({"type": "string", "enum": [v.value for v in cron.Overlap]}),
}

#: A job's priority, in the create and the update body.
PRIORITY: Schema = {"type": "integer", "minimum": -MAX_PRIORITY, "maximum": MAX_PRIORITY}

#: How many fire times a preview or a template's ``next`` lists.
FIRE_COUNT: Schema = {"type": "integer", "minimum": 1, "maximum": 100}

# tenantId is checked by the model, not here: the caller's key may supply it.
CREATE_JOB: Schema = closed_object(
    required=["idempotencyKey", "jobType"],
    properties={
        "idempotencyKey": TEXT,
        "tenantId": nullable(TEXT),
        "jobType": TEXT,
        "payload": nullable({"type": "object"}),
        "priority": nullable(PRIORITY),
        "scheduledAt": nullable(
            {**TIME, "description": "when a one-off job is due (required unless cron)"}
        ),
        "cron": nullable({**TEXT, "description": "a 5-field expression: a template"}),
        "maxAttempts": nullable(
            {
                "type": "integer",
                "maximum": MAX_ATTEMPTS_LIMIT,
                "description": "attempts before dlq; 0 or less means the job type's default",
            }
        ),
        "managedBy": nullable(
            {
                **TEXT,
                "description": "a template declared in code: the app that manages it "
                "(set by `jobscheduler schedules sync`)",
            }
        ),
        "fairnessKey": nullable(
            {**TEXT, "description": "the group the job shares its tenant's claims with"}
        ),
        "concurrencyKey": nullable(
            {**TEXT, "description": "jobs with one key share the job type's concurrency limit"}
        ),
        **SCHEDULE_FIELDS,
    },
)

JOB: Schema = reply_object(
    title="Job",
    required=[
        "id",
        "idempotencyKey",
        "tenantId",
        "jobType",
        "payload",
        "priority",
        "status",
        "scheduledAt",
        "attempts",
        "maxAttempts",
        "createdAt",
        "updatedAt",
    ],
    properties={
        "id": JOB_ID,
        "idempotencyKey": {"type": "string"},
        "tenantId": {"type": "string"},
        "jobType": {"type": "string"},
        "payload": {"type": "object"},
        "priority": {"type": "integer"},
        "status": STATUS,
        "scheduledAt": TIME,
        "cron": {"type": "string"},
        # A template's schedule settings, as CronPolicy.to_json writes them: strings.
        **{field: {"type": "string"} for field in SCHEDULE_FIELDS},
        "bufferedFireAt": TIME,
        "nextFireLocal": {"type": "string"},
        "managedBy": {"type": "string", "description": "the app managing this template"},
        "claimedBy": {"type": "string"},
        "claimedAt": TIME,
        "attempts": {"type": "integer", "minimum": 0},
        "maxAttempts": {"type": "integer", "minimum": 1},
        "lastError": {"type": "string"},
        "templateId": {**JOB_ID, "description": "the cron template that spawned this run"},
        "fairnessKey": {"type": "string"},
        "concurrencyKey": {"type": "string"},
        "held": {
            "type": "string",
            "description": "why a due job is held back, e.g. 'waiting: customer-42 has 1 of "
            "1 running' or 'rate limited: send-email 100/s'",
        },
        "result": {"description": "what the handler returned (any JSON value)"},
        "createdAt": TIME,
        "updatedAt": TIME,
        "finishedAt": {**TIME, "description": "when the job reached its final status"},
    },
)

FIRE_TIME: Schema = reply_object(
    required=["at", "local", "shifted", "repeated"],
    properties={
        "at": TIME,
        "local": {"type": "string"},
        "shifted": {"type": "boolean"},
        "repeated": {"type": "boolean"},
        "wallTime": {"type": "string"},
        "occurrence": {"type": "string", "enum": ["first", "second"]},
        "runAt": TIME,
    },
)

_SCHEDULE_REPLY: dict[str, Schema] = {
    "cron": {"type": "string"},
    "timezone": {"type": "string"},
    "dstGap": {"type": "string"},
    "dstFold": {"type": "string"},
    "fireTimes": array_of(FIRE_TIME),
}

PREVIEW_REQUEST: Schema = closed_object(
    required=["cron"],
    properties={
        "cron": TEXT,
        "timezone": SCHEDULE_FIELDS["timezone"],
        "dstGap": SCHEDULE_FIELDS["dstGap"],
        "dstFold": SCHEDULE_FIELDS["dstFold"],
        "count": nullable(FIRE_COUNT),
        "from": nullable(TIME),
    },
)

PREVIEW: Schema = reply_object(
    required=["cron", "timezone", "from", "fireTimes"],
    properties={**_SCHEDULE_REPLY, "from": TIME},
)

NEXT_FIRES: Schema = reply_object(
    required=["id", "cron", "timezone", "fireTimes"],
    properties={"id": JOB_ID, **_SCHEDULE_REPLY},
)

JOB_ID_PARAM = path_param("job_id", JOB_ID, "the job's id")

#: An operation on the jobs (``/jobs`` + ``path``).
jobs_operation = Operations(prefix="/jobs")
#: An operation on one job (``/jobs/<job_id>`` + ``path``); an unknown job is a 404.
job_operation = jobs_operation.item(JOB_ID_PARAM, JobNotFound)


def job_reply(description: str) -> Reply:
    """An answer that is one job (:data:`JOB`)."""
    return Reply(description, JOB)


# ---------------------------------------------------------------- the operations

#: The routes anyone may call, to see that the API answers and what it offers.
health_operation = Operations(tag="health", role=PUBLIC, unknown_params="ignore")

HEALTHZ = health_operation(
    "healthz",
    "GET",
    "Liveness: the API process answers",
    path="/healthz",
    responses={200: Reply("ok", {"type": "string"}, content_type="text/plain")},
)

OPENAPI = health_operation(
    "openapi",
    "GET",
    "This document",
    path="/openapi.json",
    responses={200: Reply("the OpenAPI 3.1 document", {"type": "object"})},
)


def create_schema(job_types: Iterable[str]) -> Schema:
    """``POST /jobs``'s body: the app's job types are an enum, so clients see them."""
    kinds = sorted(job_types)
    job_type: Schema = {**TEXT, "enum": kinds, "x-noun": "job type"}
    return {**CREATE_JOB, "properties": {**CREATE_JOB["properties"], "jobType": job_type}}


def create_operation(job_types: Iterable[str]) -> Operation:
    return attrs.evolve(CREATE, body=create_schema(job_types))


CREATE = jobs_operation(
    "create",
    "POST",
    "Create a one-off job (scheduledAt) or a cron template (cron)",
    tag="jobs",
    role=Role.WRITER,
    unknown_params="ignore",
    body=CREATE_JOB,
    responses={201: job_reply("the stored job")},
    errors={DuplicateJob: "", QuotaExceeded: ""},
)

GET = job_operation(
    "get",
    "GET",
    "A job as it is now",
    tag="jobs",
    role=Role.READER,
    responses={200: job_reply("the job")},
)

NEXT = job_operation(
    "next",
    "GET",
    "A cron template's next fire times",
    tag="cron",
    role=Role.READER,
    path="/next",
    params=(query_param("count", FIRE_COUNT, "how many (default 10)"),),
    responses={200: Reply("the fire times", NEXT_FIRES)},
)

#: The cron helpers that read no job: for readers.
cron_operation = Operations(tag="cron", role=Role.READER, unknown_params="ignore")

PREVIEW_OP = cron_operation(
    "preview",
    "POST",
    "The fire times of any expression (stateless)",
    path="/cron/preview",
    body=PREVIEW_REQUEST,
    responses={200: Reply("the fire times", PREVIEW)},
)

DESCRIBE_CRON = cron_operation(
    "describe_cron",
    "GET",
    "A cron expression in words (the dashboard's helper)",
    path="/ui/describe",
    params=(
        query_param("cron", TEXT, "the expression", required=True),
        query_param(
            "timezone", {"type": "string"}, "the zone its wall times are read in (default UTC)"
        ),
    ),
    responses={
        200: Reply(
            "the expression in English",
            reply_object(required=["text"], properties={"text": {"type": "string"}}),
        ),
        303: Reply("no valid key: to the dashboard's sign-in page"),
    },
)
