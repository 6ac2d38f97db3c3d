"""Declarations of the job-management, listing, batch and attempt routes, in the same
terms as :mod:`.jobs`.

The management and batch routes read and check their bodies themselves
(``view_reads_body``: :mod:`jobscheduler.api.routes.manage`, :mod:`..routes.batch`), with
messages that list the accepted fields; the schemas here document those bodies, the field
lists those routes accept are read from them, and the schemathesis fuzz test holds the two
together (no 5xx, every answer as declared).
"""

from __future__ import annotations

from collections.abc import Mapping

from jobscheduler.api.route_table import Operation, Reply
from jobscheduler.api.shapes import (
    JOB_ID,
    NO_BODY,
    STATUS,
    TEXT,
    TIME,
    Schema,
    array_of,
    closed_object,
    nullable,
)
from jobscheduler.domain.keys import Role
from jobscheduler.domain.model import DEFAULT_LIST_LIMIT, MAX_ATTEMPTS_LIMIT, MAX_LIST_LIMIT
from jobscheduler.errors import (
    DuplicateJob,
    InvalidTransition,
    JobNotFound,
    JobSchedulerError,
    QuotaExceeded,
    UnsupportedMediaType,
)
from jobscheduler.store.query import MAX_QUERY_IDS, Sort

from ._common import page_params, page_reply, query_param, reply_object, tenant_params
from .jobs import JOB, PRIORITY, SCHEDULE_FIELDS, job_operation, job_reply, jobs_operation

#: The conditions ``GET /jobs`` takes in its query and a bulk action in its ``filter``
#: (both read by ``listing._filter``); tenantId and status are spelled apart.
#: Accepted ``sort`` values of ``GET /jobs``.
SORTS = tuple(s.value for s in Sort)

CONDITIONS = (
    query_param("jobType", TEXT, "only this type"),
    query_param("templateId", JOB_ID, "a template's runs"),
    query_param("cron", {"type": "boolean"}, "true: templates only; false: no templates"),
    query_param("createdAfter", TIME, "created after"),
    query_param("createdBefore", TIME, "created before"),
    query_param("finishedBefore", TIME, "finished (completed, dlq, cancelled) before"),
    query_param("idempotencyKey", TEXT, "exactly this key"),
    query_param("idempotencyKeyPrefix", TEXT, "keys starting with this text"),
)

STATUS_LIST: Schema = array_of(STATUS)

FILTER: Schema = nullable(
    closed_object(
        {
            "tenantId": TEXT,
            "status": {"oneOf": [STATUS, STATUS_LIST]},
            **{condition.name: condition.schema for condition in CONDITIONS},
            "ids": {"type": "array", "items": JOB_ID, "minItems": 1, "maxItems": MAX_QUERY_IDS},
        }
    )
)

DRY_RUN: Schema = {"type": "boolean", "description": "true: only count the matches"}
#: A retry's new due time (null or absent: now).
RETRY_AT: Schema = {"type": ["string", "null"], "format": "date-time"}

BULK_RESULT: Schema = reply_object(
    title="Bulk result",
    required=["matched", "changed"],
    properties={
        "matched": {"type": "integer", "minimum": 0},
        "changed": {"type": "integer", "minimum": 0},
        "cancelRequested": {"type": "integer", "minimum": 0},
        "dryRun": {"type": "boolean"},
    },
)

ATTEMPT: Schema = reply_object(
    title="Attempt",
    required=["run", "number", "outcome"],
    properties={
        "run": {
            "type": "integer",
            "minimum": 0,
            "description": "the job's run: 0, then 1 after the first retry (see replays)",
        },
        "number": {"type": "integer", "minimum": 1},
        "outcome": {"type": "string"},
        "worker": {"type": "string"},
        "startedAt": TIME,
        "finishedAt": TIME,
        "errorType": {"type": "string"},
        "errorMessage": {"type": "string"},
        "traceback": {"type": "string"},
    },
)

BATCH_ANSWER: Schema = reply_object(
    title="Batch answer",
    required=["status"],
    properties={
        "status": {"type": "integer", "enum": [201, 400, 409]},
        "job": JOB,
        "jobId": JOB_ID,
        "error": {"type": "string"},
    },
)


def _action(
    name: str,
    summary: str,
    *,
    tag: str = "actions",
    body: Schema = NO_BODY,
    status: int = 200,
    responses: Mapping[int, Reply] | None = None,
    errors: Mapping[type[JobSchedulerError], str] | None = None,
) -> Operation:
    """``POST /jobs/<job_id>/<name>`` for a writer, with an optional body; unless
    ``responses`` says otherwise it answers the job after the action (``status``), and a 409
    when the job's status forbids it (``errors`` may say why)."""
    return job_operation(
        name,
        "POST",
        summary,
        tag=tag,
        role=Role.WRITER,
        path=f"/{name}",
        body=body,
        body_required=False,
        view_reads_body=True,
        responses=responses or {status: job_reply("the job after the action")},
        errors=errors or {InvalidTransition: ""},
    )


CANCEL = _action(
    "cancel",
    "Cancel a job; a running one gets a cancel request (202)",
    responses={
        200: job_reply("the cancelled job"),
        202: job_reply("running: the executor stops it within a heartbeat"),
    },
    errors={InvalidTransition: "the job is already final"},
)

RETRY = _action(
    "retry",
    "Run a dlq or cancelled job again, optionally later or with a new payload",
    body=nullable(
        closed_object({"scheduledAt": RETRY_AT, "payload": {"type": ["object", "null"]}})
    ),
    responses={200: job_reply("the job, pending again")},
    errors={InvalidTransition: "the job is not dlq or cancelled"},
)

PAUSE = _action("pause", "Pause a cron template", tag="cron")
RESUME = _action("resume", "Resume a template; it fires next from now (no burst)", tag="cron")
TRIGGER = _action(
    "trigger",
    "Run a template once now (the new run)",
    status=201,
    tag="cron",
    errors={
        InvalidTransition: "",
        DuplicateJob: "the template already has a run for this very moment (jobId names it)",
    },
)


def _bulk(name: str, summary: str, **fields: Schema) -> Operation:
    """``POST /jobs/<name>``: the action on every job matching ``filter``; ``fields`` are
    the action's own settings, beside ``filter`` and ``dryRun``."""
    return jobs_operation(
        f"bulk_{name}",
        "POST",
        summary,
        path=f"/{name}",
        tag="actions",
        role=Role.WRITER,
        unknown_params="ignore",
        view_reads_body=True,
        body=closed_object(
            required=["filter"], properties={"filter": FILTER, **fields, "dryRun": DRY_RUN}
        ),
        responses={200: Reply("how many matched and changed", BULK_RESULT)},
    )


BULK_CANCEL = _bulk(
    "cancel", "Cancel every job matching a filter (server-side, bounded per round trip)"
)
BULK_RETRY = _bulk("retry", "Retry every dlq/cancelled job matching a filter", scheduledAt=RETRY_AT)

UPDATE = job_operation(
    "update",
    "PATCH",
    "Change a cron template (cron, payload, priority, maxAttempts, schedule)",
    tag="cron",
    role=Role.WRITER,
    view_reads_body=True,
    body={
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "properties": {
            "cron": TEXT,
            "payload": {"type": "object"},
            "priority": PRIORITY,
            "maxAttempts": {"type": "integer", "minimum": 1, "maximum": MAX_ATTEMPTS_LIMIT},
            **SCHEDULE_FIELDS,
        },
    },
    responses={200: job_reply("the template, next fire recomputed")},
    errors={InvalidTransition: "not a template, or retired"},
)

DELETE = job_operation(
    "delete",
    "DELETE",
    "Retire a cron template (its past runs stay)",
    tag="cron",
    role=Role.WRITER,
    responses={200: job_reply("the retired template")},
    errors={InvalidTransition: "not a template"},
)

LIST_FILTERED = jobs_operation(
    "list",
    "GET",
    "Jobs matching the filters, in the sort's order (a bare array; Link to the next page)",
    tag="jobs",
    role=Role.READER,
    params=(
        *tenant_params("jobs", "job"),
        query_param("status", STATUS_LIST, "any of these"),
        *CONDITIONS,
        query_param(
            "sort",
            {"type": "string", "enum": list(SORTS)},
            "-createdAt (default, newest first), createdAt, scheduledAt, -scheduledAt",
        ),
        *page_params(
            MAX_LIST_LIMIT,
            size=f"page size (default {DEFAULT_LIST_LIMIT}, at most {MAX_LIST_LIMIT})",
            cursor="opaque: from the Link header",
        ),
    ),
    responses={200: page_reply("the jobs", JOB)},
    errors={JobNotFound: "templateId names no template the caller can read"},
)

BATCH = jobs_operation(
    "create_many",
    "POST",
    "Create up to 1,000 jobs; one answer per job, in order",
    path="/batch",
    tag="jobs",
    role=Role.WRITER,
    unknown_params="ignore",
    view_reads_body=True,
    body=closed_object(
        required=["jobs"],
        properties={
            "jobs": {
                "type": "array",
                "maxItems": 1000,
                "items": {"description": "a POST /jobs body, validated on its own"},
            }
        },
    ),
    responses={
        200: Reply(
            "the answers",
            reply_object(required=["results"], properties={"results": array_of(BATCH_ANSWER)}),
        )
    },
    errors={UnsupportedMediaType: "", QuotaExceeded: ""},
)

ATTEMPTS = job_operation(
    "attempts",
    "GET",
    "A job's attempt history, oldest first (by run, then attempt number)",
    tag="jobs",
    role=Role.READER,
    path="/attempts",
    responses={
        200: Reply(
            "the attempts",
            reply_object(
                required=["jobId", "attempts"],
                properties={"jobId": JOB_ID, "attempts": array_of(ATTEMPT)},
            ),
        )
    },
)
