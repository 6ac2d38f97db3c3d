"""The job management routes: cancel, retry (replay), bulk actions, cron template control.

- ``POST /jobs/{id}/cancel``: 200 with the cancelled job; 202 for a running job (a cancel
  request: the executor stops the handler within one heartbeat and writes ``cancelled``);
- ``POST /jobs/{id}/retry`` ``{scheduledAt?, payload?}``: a dlq or cancelled job back to
  pending, attempts reset, the replay recorded in ``replays``;
- ``POST /jobs/cancel`` / ``POST /jobs/retry`` ``{filter: {...}, scheduledAt?, dryRun?}``:
  every match, server-side in bounded pages; ``{"matched", "changed", "cancelRequested"}``
  (``dryRun: true`` only counts the matches, for a confirmation; the filter may name
  ``ids``, e.g. a page's selection);
- templates: ``POST /jobs/{id}/pause`` | ``/resume`` | ``/trigger`` (201, the new run),
  ``PATCH /jobs/{id}``, ``DELETE /jobs/{id}`` (retires it; its runs stay).

Every action needs a writer (the role their declarations in
:mod:`jobscheduler.api.schemas.manage` name) and a job the caller sees (another tenant's job
is a 404); it answers with the job after the action, is a no-op where the job
already is where the action leads, or is a 409 ``{"error", "jobId", "status"}``. A bulk
filter's tenant comes from the key (``Principal.scope``): a tenant-bound key acts on its own
tenant only (naming another is a 403); an all-tenant admin names one or, naming none, acts
on every tenant. Actions are audited by the generic after_request hook (tenancy.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from quart import Response, g, request

from jobscheduler.api import actions, bulk
from jobscheduler.api.auth import current_principal
from jobscheduler.api.bounded import BoundedCalls
from jobscheduler.api.job_filters import parse_filter
from jobscheduler.api.replies import json_response
from jobscheduler.api.route_table import Operation, RouteTable
from jobscheduler.api.schemas import manage as ops
from jobscheduler.domain import cron
from jobscheduler.domain.model import (
    MAX_ATTEMPTS_LIMIT,
    MAX_PRIORITY,
    Job,
    Status,
    cron_policy_of,
    job_to_json,
    parse_time,
)
from jobscheduler.domain.validation import check_payload_strings as check_payload
from jobscheduler.domain.validation import loads_json_body
from jobscheduler.errors import InvalidTransition, ValidationError
from jobscheduler.roles.deps import Deps
from jobscheduler.store.query import JobQuery

from .jobs import visible_job


def _fields(op: Operation) -> frozenset[str]:
    """The body fields ``op`` declares (the ones its view accepts)."""
    return frozenset((op.body or {}).get("properties", ()))


RETRY_FIELDS = _fields(ops.RETRY)
BULK_FIELDS = _fields(ops.BULK_CANCEL)
BULK_RETRY_FIELDS = _fields(ops.BULK_RETRY)
PATCH_FIELDS = _fields(ops.UPDATE)
#: Bound of one bulk page (a read and a write of up to BULK_BATCH jobs): far above a healthy
#: store's time for it (about 1.5 s on the test stack's FerretDB), far below a hang.
BULK_PAGE_TIMEOUT = 30.0


async def _body(*, required: bool = False) -> dict[str, Any]:
    """The JSON object body; an empty body reads as ``{}`` unless ``required``."""
    raw = await request.get_data(cache=False)
    data = raw.encode() if isinstance(raw, str) else raw
    if not data.strip():
        if required:
            raise ValidationError("request body must be a JSON object")
        return {}
    mimetype = request.mimetype
    if mimetype and mimetype != "application/json" and not mimetype.endswith("+json"):
        raise ValidationError("Content-Type must be application/json")
    body = loads_json_body(data)
    if not isinstance(body, dict):
        raise ValidationError("request body must be a JSON object")
    return body


def _only(body: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ValidationError(
            f"unknown field(s): {', '.join(u[:40] for u in unknown)} "
            f"(accepted: {', '.join(sorted(allowed))})"
        )


def _integer(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{field}: must be an integer")
    if isinstance(value, float) and not value.is_integer():
        raise ValidationError(f"{field}: must be an integer")
    number = int(value)
    if not low <= number <= high:
        raise ValidationError(f"{field}: must be between {low} and {high}")
    return number


def parse_patch(body: Mapping[str, Any], template: Job, validate_payload: Any) -> dict[str, Any]:
    """Validate a ``PATCH /jobs/{id}`` body against the template into the Job fields it
    changes (schedule fields are merged with the template's current ones)."""
    _only(body, PATCH_FIELDS)
    if not body:
        raise ValidationError(f"nothing to change (accepted: {', '.join(sorted(PATCH_FIELDS))})")
    fields: dict[str, Any] = {}
    expression = template.cron
    if "cron" in body:
        if not isinstance(body["cron"], str) or not body["cron"].strip():
            raise ValidationError("cron: must be a 5-field expression")
        expression = cron.validate(body["cron"])
        fields["cron"] = expression
    assert expression is not None
    schedule = {k: v for k, v in body.items() if k in cron.POLICY_FIELDS}
    if schedule or "cron" in fields:
        merged = {**cron_policy_of(template).to_json(), **schedule}
        fields["cron_policy"] = cron.parse_policy(merged, expression)
    if "payload" in body:
        payload = body["payload"]
        if not isinstance(payload, dict):
            raise ValidationError("payload: must be a JSON object")
        check_payload(payload)
        if validate_payload is not None:
            validate_payload(payload)
        fields["payload"] = payload
    if "priority" in body:
        fields["priority"] = _integer(body["priority"], "priority", -MAX_PRIORITY, MAX_PRIORITY)
    if "maxAttempts" in body:
        fields["max_attempts"] = _integer(body["maxAttempts"], "maxAttempts", 1, MAX_ATTEMPTS_LIMIT)
    return fields


def register_manage_routes(routes: RouteTable, deps: Deps, calls: BoundedCalls) -> None:
    """Add the management routes to ``routes``.

    ``calls`` bounds each action's store work by API_STORE_TIMEOUT (see bounded.py); a bulk
    action's pages are bounded one by one, by BULK_PAGE_TIMEOUT.
    """
    app = routes.app
    validators = deps.registry.validators()
    bounded: actions.Caller = calls.call
    page_calls = BoundedCalls(
        max(BULK_PAGE_TIMEOUT, deps.settings.api_store_timeout), per_request=False
    )
    paged: actions.Caller = page_calls.call

    @app.before_serving
    async def _attach_page_calls() -> None:
        page_calls.attach(app.nursery)

    async def load(job_id: str) -> Job:
        """The job a writer acts on: 404 for an unknown id or another tenant's job."""
        return await visible_job(deps, calls, job_id)

    def reply(outcome: actions.Outcome, status: int = 200) -> Response:
        return json_response(job_to_json(outcome.job), status)

    @routes.route(ops.CANCEL)
    async def cancel_job(job_id: str) -> Response:
        _only(await _body(), frozenset())
        outcome = await bounded(actions.cancel, deps, await load(job_id))
        return reply(outcome, 202 if outcome.job.status is Status.RUNNING else 200)

    @routes.route(ops.RETRY)
    async def retry_job(job_id: str) -> Response:
        body = await _body()
        _only(body, RETRY_FIELDS)
        job = await load(job_id)
        scheduled_at = None
        if body.get("scheduledAt") is not None:
            if job.cron is not None:
                raise ValidationError("scheduledAt: a template's next run follows its schedule")
            if not isinstance(body["scheduledAt"], str):
                raise ValidationError("scheduledAt: must be an RFC3339 string")
            scheduled_at = parse_time(body["scheduledAt"], "scheduledAt")
        payload = body.get("payload")
        if payload is not None:
            if not isinstance(payload, dict):
                raise ValidationError("payload: must be a JSON object")
            validator = validators.get(job.job_type)
            check_payload(payload)
            if validator is not None:
                validator(payload)
        outcome = await bounded(
            actions.retry, deps, job, scheduled_at=scheduled_at, payload=payload
        )
        return reply(outcome)

    async def bulk_query(body: Mapping[str, Any]) -> JobQuery:
        principal = current_principal()
        if "filter" not in body:
            raise ValidationError('filter is required (e.g. {"filter": {"status": "dlq"}})')
        query, tenant = parse_filter(body["filter"])
        return attrs.evolve(query, tenant_id=principal.scope(tenant))

    def dry_run(body: Mapping[str, Any]) -> bool:
        value = body.get("dryRun", False)
        if not isinstance(value, bool):
            raise ValidationError("dryRun: must be true or false")
        return value

    def bulk_reply(result: bulk.BulkResult, query: JobQuery, dry: bool) -> Response:
        g.audit_detail = (
            f"tenant {query.tenant_id or '(all)'}: {result.matched} matched, "
            f"{result.changed} changed{' (dry run)' if dry else ''}"
        )
        reply = {
            "matched": result.matched,
            "changed": result.changed,
            "cancelRequested": result.cancel_requested,
        }
        if dry:
            reply["dryRun"] = True
        return json_response(reply, 200)

    @routes.route(ops.BULK_CANCEL)
    async def bulk_cancel() -> Response:
        body = await _body(required=True)
        _only(body, BULK_FIELDS)
        query = await bulk_query(body)
        dry = dry_run(body)
        result = await bulk.bulk_cancel(deps, query, call=paged, dry_run=dry)
        return bulk_reply(result, query, dry)

    @routes.route(ops.BULK_RETRY)
    async def bulk_retry() -> Response:
        body = await _body(required=True)
        _only(body, BULK_RETRY_FIELDS)
        query = await bulk_query(body)
        scheduled_at = None
        if body.get("scheduledAt") is not None:
            if not isinstance(body["scheduledAt"], str):
                raise ValidationError("scheduledAt: must be an RFC3339 string")
            scheduled_at = parse_time(body["scheduledAt"], "scheduledAt")
        dry = dry_run(body)
        result = await bulk.bulk_retry(
            deps, query, scheduled_at=scheduled_at, call=paged, dry_run=dry
        )
        return bulk_reply(result, query, dry)

    @routes.route(ops.PAUSE)
    async def pause_template(job_id: str) -> Response:
        _only(await _body(), frozenset())
        return reply(await bounded(actions.pause, deps, await load(job_id)))

    @routes.route(ops.RESUME)
    async def resume_template(job_id: str) -> Response:
        _only(await _body(), frozenset())
        return reply(await bounded(actions.resume, deps, await load(job_id)))

    @routes.route(ops.TRIGGER)
    async def trigger_template(job_id: str) -> Response:
        _only(await _body(), frozenset())
        run = await bounded(actions.trigger, deps, await load(job_id))
        return json_response(job_to_json(run), 201)

    @routes.route(ops.UPDATE)
    async def update_template(job_id: str) -> Response:
        body = await _body(required=True)
        template = await load(job_id)
        if template.cron is None:
            raise InvalidTransition(
                f"job {template.id} is not a cron template; only templates can be changed",
                job_id=template.id,
                status=template.status.value,
            )
        fields = parse_patch(body, template, validators.get(template.job_type))
        return reply(await bounded(actions.update_template, deps, template, fields))

    @routes.route(ops.DELETE)
    async def retire_template(job_id: str) -> Response:
        return reply(await bounded(actions.retire, deps, await load(job_id)))
