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

from collections.abc import Iterable, Mapping
from typing import Literal

import attrs

from jobscheduler.api.route_table import PUBLIC, Access, Operation, Param, Reply
from jobscheduler.api.shapes import JOB_ID, STATUS, TEXT, TIME, Schema, nullable
from jobscheduler.domain import cron
from jobscheduler.domain.keys import Role
from jobscheduler.domain.model import MAX_ATTEMPTS_LIMIT, MAX_PRIORITY
from jobscheduler.errors import DuplicateJob, JobNotFound, JobSchedulerError, QuotaExceeded

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
CREATE_JOB: Schema = {
    "type": "object",
    "required": ["idempotencyKey", "jobType"],
    "additionalProperties": False,
    "properties": {
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
}

JOB: Schema = {
    "title": "Job",
    "type": "object",
    "required": [
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
    "properties": {
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
}

FIRE_TIME: Schema = {
    "type": "object",
    "required": ["at", "local", "shifted", "repeated"],
    "properties": {
        "at": TIME,
        "local": {"type": "string"},
        "shifted": {"type": "boolean"},
        "repeated": {"type": "boolean"},
        "wallTime": {"type": "string"},
        "occurrence": {"type": "string", "enum": ["first", "second"]},
        "runAt": TIME,
    },
}

_SCHEDULE_REPLY: dict[str, Schema] = {
    "cron": {"type": "string"},
    "timezone": {"type": "string"},
    "dstGap": {"type": "string"},
    "dstFold": {"type": "string"},
    "fireTimes": {"type": "array", "items": FIRE_TIME},
}

PREVIEW_REQUEST: Schema = {
    "type": "object",
    "required": ["cron"],
    "additionalProperties": False,
    "properties": {
        "cron": TEXT,
        "timezone": SCHEDULE_FIELDS["timezone"],
        "dstGap": SCHEDULE_FIELDS["dstGap"],
        "dstFold": SCHEDULE_FIELDS["dstFold"],
        "count": nullable(FIRE_COUNT),
        "from": nullable(TIME),
    },
}

PREVIEW: Schema = {
    "type": "object",
    "required": ["cron", "timezone", "from", "fireTimes"],
    "properties": {**_SCHEDULE_REPLY, "from": TIME},
}

NEXT_FIRES: Schema = {
    "type": "object",
    "required": ["id", "cron", "timezone", "fireTimes"],
    "properties": {"id": JOB_ID, **_SCHEDULE_REPLY},
}

JOB_ID_PARAM = Param(name="job_id", where="path", schema=JOB_ID, description="the job's id")
#: The tenant filter of the listings and figures that may span tenants.
TENANT_PARAM = Param(name="tenantId", where="query", schema=TEXT, description="one tenant")


def tenant_params(items: str, item: str) -> tuple[Param, Param]:
    """``tenantId`` and ``allTenants`` of a listing of ``items`` (each an ``item``)."""
    return (
        attrs.evolve(
            TENANT_PARAM,
            description="the tenant: required, unless allTenants=true (a key bound to a tenant "
            "lists its own by default)",
        ),
        Param(
            name="allTenants",
            where="query",
            schema={"type": "boolean"},
            description=f"true: every tenant's {items}, instead of tenantId (admin keys of every "
            f"tenant only; each {item} names its tenantId)",
        ),
    )


def page_params(maximum: int, *, size: str, cursor: str) -> tuple[Param, Param]:
    """``limit`` (1..``maximum``) and the opaque ``cursor`` of a paged listing; ``size``
    and ``cursor`` describe them."""
    return (
        Param(
            name="limit",
            where="query",
            schema={"type": "integer", "minimum": 1, "maximum": maximum},
            description=size,
        ),
        Param(name="cursor", where="query", schema={"type": "string"}, description=cursor),
    )


def page_reply(description: str, items: Schema) -> Reply:
    """An answer that is one page of a listing: an array of ``items``, with a
    ``Link: rel="next"`` header unless it is the last page."""
    return Reply(
        description=description,
        schema={"type": "array", "items": items},
        headers={"Link": 'the next page: <url>; rel="next" (absent on the last page)'},
    )


def job_reply(description: str) -> Reply:
    """An answer that is one job (:data:`JOB`)."""
    return Reply(description=description, schema=JOB)


def job_operation(
    id: str,
    method: Literal["GET", "POST", "PATCH", "DELETE"],
    summary: str,
    *,
    tag: str,
    role: Access,
    path: str = "",
    params: tuple[Param, ...] = (),
    unknown_params: Literal["refuse", "ignore"] = "ignore",
    body: Schema | None = None,
    body_required: bool = True,
    view_reads_body: bool = False,
    responses: Mapping[int, Reply],
    errors: Mapping[type[JobSchedulerError], str] | None = None,
) -> Operation:
    """An operation on one job: rule ``/jobs/<job_id>`` + ``path``, the job id its first
    parameter, then ``params``; an unknown or another tenant's job is a 404. Unknown query
    parameters are ignored unless ``unknown_params`` says otherwise."""
    return Operation(
        id=id,
        method=method,
        rule=f"/jobs/<job_id>{path}",
        summary=summary,
        tag=tag,
        role=role,
        params=(JOB_ID_PARAM, *params),
        unknown_params=unknown_params,
        body=body,
        body_required=body_required,
        view_reads_body=view_reads_body,
        responses=responses,
        errors={JobNotFound: "", **(errors or {})},
    )


# ---------------------------------------------------------------- the operations

HEALTHZ = Operation(
    id="healthz",
    method="GET",
    rule="/healthz",
    summary="Liveness: the API process answers",
    tag="health",
    role=PUBLIC,
    unknown_params="ignore",
    responses={
        200: Reply(
            description="ok",
            schema={"type": "string"},
            content_type="text/plain",
        )
    },
)

OPENAPI = Operation(
    id="openapi",
    method="GET",
    rule="/openapi.json",
    summary="This document",
    tag="health",
    role=PUBLIC,
    unknown_params="ignore",
    responses={200: Reply(description="the OpenAPI 3.1 document", schema={"type": "object"})},
)


def create_schema(job_types: Iterable[str]) -> Schema:
    """``POST /jobs``'s body: the app's job types are an enum, so clients see them."""
    kinds = sorted(job_types)
    job_type: Schema = {**TEXT, "enum": kinds, "x-noun": "job type"}
    return {**CREATE_JOB, "properties": {**CREATE_JOB["properties"], "jobType": job_type}}


def create_operation(job_types: Iterable[str]) -> Operation:
    return attrs.evolve(CREATE, body=create_schema(job_types))


CREATE = Operation(
    id="create",
    method="POST",
    rule="/jobs",
    summary="Create a one-off job (scheduledAt) or a cron template (cron)",
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
    params=(
        Param(name="count", where="query", schema=FIRE_COUNT, description="how many (default 10)"),
    ),
    responses={200: Reply(description="the fire times", schema=NEXT_FIRES)},
)

PREVIEW_OP = Operation(
    id="preview",
    method="POST",
    rule="/cron/preview",
    summary="The fire times of any expression (stateless)",
    tag="cron",
    role=Role.READER,
    unknown_params="ignore",
    body=PREVIEW_REQUEST,
    responses={200: Reply(description="the fire times", schema=PREVIEW)},
)

DESCRIBE_CRON = Operation(
    id="describe_cron",
    method="GET",
    rule="/ui/describe",
    summary="A cron expression in words (the dashboard's helper)",
    tag="cron",
    role=Role.READER,
    params=(
        Param(name="cron", where="query", schema=TEXT, description="the expression", required=True),
        Param(
            name="timezone",
            where="query",
            schema={"type": "string"},
            description="the zone its wall times are read in (default UTC)",
        ),
    ),
    unknown_params="ignore",
    responses={
        200: Reply(
            description="the expression in English",
            schema={
                "type": "object",
                "required": ["text"],
                "properties": {"text": {"type": "string"}},
            },
        ),
        303: Reply(description="no valid key: to the dashboard's sign-in page"),
    },
)
