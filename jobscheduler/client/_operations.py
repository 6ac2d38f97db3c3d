"""Every operation of the API, once: a function with the public method's parameters and
docstring that builds the :class:`~._call.Call` to send (or, for ``wait``, the :class:`Poll`).
Each is named after the operation it calls (its ``operationId``; ``pages`` reads ``list``'s
pages, ``wait`` polls ``get``); where the method returns less than the whole answer (the
array inside an object, a listing's items), its docstring says which part, and the HTTP
reference generated from the API's document repeats it beside the operation.

:class:`~jobscheduler.client.Client` and :class:`~jobscheduler.client.AsyncClient` bind each
of them as a method of the same name (``get = returning(operations.get)``), so the two clients
have one definition of each call and cannot drift apart; what differs between them (sending,
following pages, sleeping between polls) is all they write. No I/O happens here. A trailing
``_`` (``list_``, ``next_``) keeps a builtin's name free in this module; the method drops it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, ClassVar, TypeVar, Unpack, cast

import attrs
import httpx

from jobscheduler.errors import WaitTimeout

from ._call import Call, Paged, dict_of, job_of, paged
from ._flow import flow_held as flow_held
from ._flow import flow_limits as flow_limits
from ._flow import flow_weights as flow_weights
from ._flow import put_flow_limits as put_flow_limits
from ._flow import put_flow_weight as put_flow_weight
from ._requests import (
    bulk_ids,
    format_time,
    given,
    job_body,
    job_filter,
    job_id_of,
    list_params,
)
from ._types import FINAL_STATUSES, BatchAnswer, Filter, Job, ListOptions, Selection
from ._webhooks import create_webhook as create_webhook
from ._webhooks import delete_webhook as delete_webhook
from ._webhooks import list_webhooks as list_webhooks
from ._webhooks import webhook_deliveries as webhook_deliveries

F = TypeVar("F", bound=Callable[..., Any])


def as_method(method: F, operation: Callable[..., Any]) -> F:
    """``method`` (``self`` then any arguments) described as ``operation``: its name, its
    docstring and its parameters after ``self``, for ``help()``, ``inspect`` and editors."""
    method.__name__ = method.__qualname__ = operation.__name__.removesuffix("_")
    method.__doc__ = operation.__doc__
    signature = inspect.signature(operation)
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__dict__["__signature__"] = signature.replace(
        parameters=[this, *signature.parameters.values()],
        return_annotation=inspect.Signature.empty,
    )
    return method


# ------------------------------------------------------------------ creating


def create(
    job_type: str,
    *,
    tenant_id: str,
    payload: Mapping[str, Any] | None = None,
    scheduled_at: datetime | str | None = None,
    cron: str | None = None,
    idempotency_key: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    **schedule: Any,
) -> Call[Job]:
    """Create a job (due now unless ``scheduled_at``) or a cron template (``cron``)."""
    body = job_body(
        job_type,
        tenant_id=tenant_id,
        payload=payload,
        scheduled_at=scheduled_at,
        cron=cron,
        idempotency_key=idempotency_key,
        priority=priority,
        max_attempts=max_attempts,
        **schedule,
    )
    return Call("POST", "/jobs", job_of, body=body, creates=True, traced=True)


@attrs.frozen(kw_only=True)
class CreateOrGet:
    """What ``create_or_get`` does: send :attr:`create`; if the key is taken (a 409 naming
    the job holding it), read that job (:meth:`get`) instead."""

    create: Call[Job]

    def get(self, existing_id: str) -> Call[Job]:
        return get(existing_id)


def create_or_get(
    job_type: str,
    *,
    tenant_id: str,
    idempotency_key: str,
    payload: Mapping[str, Any] | None = None,
    scheduled_at: datetime | str | None = None,
    cron: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    **schedule: Any,
) -> CreateOrGet:
    """Create a job or a template under ``idempotency_key``, or get the job already holding
    that key (as it is, whatever this call asked for): ``(job, created)``."""
    if not isinstance(idempotency_key, str) or not idempotency_key:
        raise ValueError("idempotency_key: create_or_get needs the key to look for")
    return CreateOrGet(
        create=create(
            job_type,
            tenant_id=tenant_id,
            payload=payload,
            scheduled_at=scheduled_at,
            cron=cron,
            idempotency_key=idempotency_key,
            priority=priority,
            max_attempts=max_attempts,
            **schedule,
        )
    )


def create_many(bodies: Iterable[Mapping[str, Any]]) -> Call[list[BatchAnswer]]:
    """Create up to 1,000 jobs in one request (bodies from :func:`job_body`); one answer
    per body, in order: the ``results`` array of the API's answer."""

    def decode(response: httpx.Response) -> list[BatchAnswer]:
        return cast(list[BatchAnswer], response.json()["results"])

    return Call(
        "POST", "/jobs/batch", decode, body={"jobs": [dict(b) for b in bodies]}, traced=True
    )


# ------------------------------------------------------------------ reading


def get(job_id: str) -> Call[Job]:
    """The job by its id; JobNotFound when there is none."""
    return Call("GET", f"/jobs/{job_id_of(job_id)}", job_of)


def attempts(job_id: str) -> Call[list[dict[str, Any]]]:
    """The job's attempt history, oldest first: the ``attempts`` array of the API's answer
    (which wraps it in an object with the ``jobId`` you asked for)."""

    def decode(response: httpx.Response) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], response.json()["attempts"])

    return Call("GET", f"/jobs/{job_id_of(job_id)}/attempts", decode)


def _jobs_of(body: Any) -> list[Job]:
    return cast(list[Job], body)


def pages(tenant_id: str | None = None, **options: Unpack[ListOptions]) -> Call[Paged[Job]]:
    """Pages of matching jobs following the ``Link: rel="next"`` cursor: newest first
    unless ``sort`` (one of :data:`SORTS`). Filters: ``status``, ``job_type``,
    ``template_id``, ``cron``, ``created_after``/``created_before``, ``finished_before``,
    ``idempotency_key``
    (exact) or ``idempotency_key_prefix``; ``page_size`` is the API's ``limit``. Without a
    ``tenant_id``, the key's tenant; ``all_tenants=True``: every tenant's jobs (an admin key
    of every tenant)."""
    return paged("/jobs", _jobs_of, list_params(tenant_id, **options))


def list_(tenant_id: str | None = None, **options: Unpack[ListOptions]) -> Call[Paged[Job]]:
    """Every matching job (the keywords of :meth:`pages`), fetched a page at a time: the
    items of each page's array, following its ``Link`` header."""
    return pages(tenant_id, **options)


def stats(tenant_id: str | None = None) -> Call[dict[str, Any]]:
    """Counts by status and job type, queue lag, recent completions and failures."""
    params = [("tenantId", tenant_id)] if tenant_id else []
    return Call("GET", "/stats", dict_of, params=params)


def _occurrences_of(body: Any) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], body["occurrences"])


def occurrences(job_id: str, *, page_size: int | None = None) -> Call[Paged[dict[str, Any]]]:
    """A cron template's ledger, newest fire time first, fetched a page at a time (the
    items of each answer's ``occurrences``): each fire time and what became of it
    (``spawned``/``buffered`` with its run, or ``skipped`` with a reason). ``page_size`` is
    the API's ``limit`` (50; at most 500)."""
    params = [("limit", str(page_size))] if page_size is not None else []
    return paged(f"/jobs/{job_id_of(job_id)}/occurrences", _occurrences_of, params)


def next_(job_id: str, count: int | None = None) -> Call[dict[str, Any]]:
    """A cron template's next fire times."""
    params = [("count", str(count))] if count is not None else []
    return Call("GET", f"/jobs/{job_id_of(job_id)}/next", dict_of, params=params)


def preview(
    cron: str,
    *,
    timezone: str | None = None,
    count: int | None = None,
    start: datetime | str | None = None,
    dst_gap: str | None = None,
    dst_fold: str | None = None,
) -> Call[dict[str, Any]]:
    """The fire times of any expression (nothing is stored)."""
    body = {"cron": cron, "timezone": timezone, "count": count, "dstGap": dst_gap}
    body |= {"dstFold": dst_fold, "from": format_time(start) if start else None}
    return Call("POST", "/cron/preview", dict_of, body=given(body))


@attrs.frozen(kw_only=True)
class Poll:
    """What ``wait`` does: GET the job (:attr:`call`) until it is final, ``interval`` seconds
    apart, for at most ``timeout`` seconds (each client keeps the time with its own clock)."""

    #: What is polled, in the WaitTimeout message.
    what: ClassVar[str] = "job"

    job_id: str
    timeout: float
    interval: float

    @property
    def call(self) -> Call[Job]:
        return get(self.job_id)

    def pause(self, job: Job, *, left: float) -> float | None:
        """Seconds to sleep before the next poll, ``left`` seconds before the deadline; None
        once the job is final, WaitTimeout when no time is left."""
        status = job.get("status")
        if status in FINAL_STATUSES:
            return None
        if left <= 0:
            raise WaitTimeout(f"{self.what} {self.job_id} still {status} after {self.timeout:g}s")
        return min(self.interval, left)


def wait(job_id: str, timeout: float = 60.0, *, interval: float = 0.2) -> Poll:
    """Poll until the job is final (completed, dlq, cancelled); WaitTimeout otherwise."""
    return Poll(job_id=job_id, timeout=timeout, interval=interval)


# ------------------------------------------------------------------ acting


def _action(job_id: str, name: str, body: Mapping[str, Any] | None = None) -> Call[Job]:
    """``POST /jobs/{id}/<name>`` (cancel, retry, pause, resume, trigger): the job after it."""
    return Call("POST", f"/jobs/{job_id_of(job_id)}/{name}", job_of, body=dict(body or {}))


def cancel(job_id: str) -> Call[Job]:
    """Cancel a job (a running one gets a cancel request); InvalidTransition if it is final."""
    return _action(job_id, "cancel")


def retry(
    job_id: str,
    *,
    payload: Mapping[str, Any] | None = None,
    scheduled_at: datetime | str | None = None,
) -> Call[Job]:
    """Run a dlq or cancelled job again (now, or at ``scheduled_at``), optionally with a
    new payload."""
    body: Filter = {}
    if payload is not None:
        body["payload"] = dict(payload)
    if scheduled_at is not None:
        body["scheduledAt"] = format_time(scheduled_at)
    return _action(job_id, "retry", body)


def _bulk(
    name: str,
    tenant_id: str | None,
    *,
    ids: Iterable[str] | None,
    dry_run: bool,
    scheduled_at: datetime | str | None = None,
    **selection: Unpack[Selection],
) -> Call[dict[str, Any]]:
    """``POST /jobs/cancel`` or ``/jobs/retry`` over every job matching the filter (and, with
    ``ids``, among those jobs): ``{"matched", "changed", "cancelRequested"}``; with
    ``dry_run`` nothing changes and ``matched`` is what the request would act on."""
    selected = job_filter(tenant_id=tenant_id, **selection)
    chosen = bulk_ids(ids)
    if chosen is not None:
        selected["ids"] = chosen
    body: dict[str, Any] = {"filter": selected}
    if scheduled_at is not None:
        body["scheduledAt"] = format_time(scheduled_at)
    if not isinstance(dry_run, bool):
        raise ValueError("dry_run: must be True or False")
    if dry_run:
        body["dryRun"] = True
    return Call("POST", f"/jobs/{name}", dict_of, body=body)


def bulk_cancel(
    tenant_id: str | None = None,
    *,
    ids: Iterable[str] | None = None,
    dry_run: bool = False,
    **selection: Unpack[Selection],
) -> Call[dict[str, Any]]:
    """Cancel every job matching the filter (the filter keywords of :meth:`pages`) and,
    with ``ids`` (at most 1,000), among those jobs; ``dry_run`` only counts the matches."""
    return _bulk("cancel", tenant_id, ids=ids, dry_run=dry_run, **selection)


def bulk_retry(
    tenant_id: str | None = None,
    *,
    ids: Iterable[str] | None = None,
    dry_run: bool = False,
    scheduled_at: datetime | str | None = None,
    **selection: Unpack[Selection],
) -> Call[dict[str, Any]]:
    """Retry every dlq/cancelled job matching the filter (as :meth:`bulk_cancel`), due
    now or at ``scheduled_at``; ``dry_run`` only counts the matches."""
    return _bulk(
        "retry", tenant_id, ids=ids, dry_run=dry_run, scheduled_at=scheduled_at, **selection
    )


def pause(job_id: str) -> Call[Job]:
    """Pause a cron template: it fires no more until resumed."""
    return _action(job_id, "pause")


def resume(job_id: str) -> Call[Job]:
    """Resume a paused template; it fires next from now (no burst of missed runs)."""
    return _action(job_id, "resume")


def trigger(job_id: str) -> Call[Job]:
    """Run a template once now (its own instance key)."""
    return _action(job_id, "trigger")


def update(
    job_id: str,
    *,
    cron: str | None = None,
    payload: Mapping[str, Any] | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    **schedule: Any,
) -> Call[Job]:
    """Change a template's expression, payload, priority, maxAttempts or schedule
    settings (``timezone``, ``catchUp``, ``jitter``, ... by their API names); its next
    fire time is recomputed."""
    changes = {"cron": cron, "payload": payload, "priority": priority, **schedule}
    changes["maxAttempts"] = max_attempts
    return Call("PATCH", f"/jobs/{job_id_of(job_id)}", job_of, body=given(changes))


def delete(job_id: str) -> Call[Job]:
    """Retire a template (its past runs stay)."""
    return Call("DELETE", f"/jobs/{job_id_of(job_id)}", job_of)
