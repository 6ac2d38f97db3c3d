"""The built-in ``start-workflow`` job type: a job that starts a workflow when it runs.

Its payload is a workflow's steps, as in ``POST /workflows`` (``{"steps": [...]}``). Run, it
starts that workflow in its own tenant through ``ctx.start_workflow`` (the executor's store,
no HTTP), under a key derived from the job, so a retried attempt finds the workflow the first
one started. A cron template of this type starts one workflow per fire time, each linked to
the template (``templateId``, ``fireAt``); a one-off job of it starts a workflow later
(``scheduledAt``). The job completes once the workflow is stored; its result names it
(``{"workflowId": ..., "status": ...}``); the workflow's outcome is the workflow's own.

The payload is validated when the job (or template) is created, as ``POST /workflows``
validates a body, so a template whose steps name an unknown job type or form a cycle is a 400
then, not a failure at 2 a.m.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobscheduler.domain.validation import PayloadValidator
from jobscheduler.domain.workflows import parse_workflow_request
from jobscheduler.errors import ValidationError

from .context import JobContext

if TYPE_CHECKING:
    from .registry import HandlerRegistry

#: The job type's name.
START_WORKFLOW = "start-workflow"
#: Stand-ins for the fields the job supplies when it runs (its tenant, a key from its id).
_STAND_INS = {"tenantId": "tenant", "idempotencyKey": "key"}


def workflow_validator(registry: HandlerRegistry) -> PayloadValidator:
    """The payload check of ``start-workflow``: the steps as ``POST /workflows`` checks them,
    with the validators of every job type in ``registry`` when it is called."""

    def validate(payload: Mapping[str, Any]) -> None:
        taken = sorted(set(_STAND_INS) & set(payload))
        if taken:
            raise ValidationError(
                f"payload.{taken[0]}: a start-workflow job starts its workflow in its own "
                "tenant under a key derived from the job; leave it out"
            )
        try:
            parse_workflow_request(
                {**payload, **_STAND_INS},
                now=datetime.now(UTC),
                job_types=registry.validators(),
                max_attempts_defaults=registry.max_attempts_defaults(),
            )
        except ValidationError as exc:
            message = str(exc)
            raise ValidationError(
                f"payload.{message}" if message.startswith("steps") else f"payload: {message}"
            ) from None

    return validate


async def start_workflow(ctx: JobContext) -> dict[str, Any]:
    """Start the workflow of ``payload.steps``; its id and status as the job's result."""
    workflow = await ctx.start_workflow(ctx.payload["steps"], name="workflow")
    return {"workflowId": workflow["id"], "status": workflow["status"]}
