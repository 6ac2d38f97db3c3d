"""What the sync and async clients share: one :class:`Call` per operation (method, path,
query, body, and how to read the answer) and the bookkeeping of ``wait`` (:class:`Poll`).
No I/O happens here: each client only sends a call (``_send``), follows the pages and sleeps
between polls."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Unpack, cast

import attrs
import httpx

from jobscheduler.errors import WaitTimeout

from ._call import Call, Paged, dict_of, job_of, paged
from ._requests import bulk_ids, format_time, given, job_filter, job_id_of, list_params
from ._types import FINAL_STATUSES, BatchAnswer, Filter, Job, ListOptions, Selection


def _jobs_of(body: Any) -> list[Job]:
    return cast(list[Job], body)


def listing(tenant_id: str | None, **options: Unpack[ListOptions]) -> Call[Paged[Job]]:
    """The first page of ``GET /jobs`` (a JSON list of jobs)."""
    return paged("/jobs", _jobs_of, list_params(tenant_id, **options))


# ------------------------------------------------------------------ the operations


def create(body: Mapping[str, Any]) -> Call[Job]:
    return Call("POST", "/jobs", job_of, body=dict(body), creates=True)


def create_many(bodies: Iterable[Mapping[str, Any]]) -> Call[list[BatchAnswer]]:
    def decode(response: httpx.Response) -> list[BatchAnswer]:
        return cast(list[BatchAnswer], response.json()["results"])

    return Call("POST", "/jobs/batch", decode, body={"jobs": [dict(b) for b in bodies]})


def get(job_id: str) -> Call[Job]:
    return Call("GET", f"/jobs/{job_id_of(job_id)}", job_of)


def attempts(job_id: str) -> Call[list[dict[str, Any]]]:
    def decode(response: httpx.Response) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], response.json()["attempts"])

    return Call("GET", f"/jobs/{job_id_of(job_id)}/attempts", decode)


def action(job_id: str, name: str, body: Mapping[str, Any] | None = None) -> Call[Job]:
    """``POST /jobs/{id}/<name>`` (cancel, retry, pause, resume, trigger): the job after it."""
    return Call("POST", f"/jobs/{job_id_of(job_id)}/{name}", job_of, body=dict(body or {}))


def bulk(
    name: str,
    tenant_id: str | None,
    *,
    ids: Iterable[str] | None = None,
    dry_run: bool = False,
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


def delete(job_id: str) -> Call[Job]:
    return Call("DELETE", f"/jobs/{job_id_of(job_id)}", job_of)


def stats(tenant_id: str | None) -> Call[dict[str, Any]]:
    params = [("tenantId", tenant_id)] if tenant_id else []
    return Call("GET", "/stats", dict_of, params=params)


def _occurrences_of(body: Any) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], body["occurrences"])


def occurrences(job_id: str, page_size: int | None) -> Call[Paged[dict[str, Any]]]:
    """The first page of a template's ledger, ``GET /jobs/{id}/occurrences``."""
    params = [("limit", str(page_size))] if page_size is not None else []
    return paged(f"/jobs/{job_id_of(job_id)}/occurrences", _occurrences_of, params)


def next_fires(job_id: str, count: int | None) -> Call[dict[str, Any]]:
    params = [("count", str(count))] if count is not None else []
    return Call("GET", f"/jobs/{job_id_of(job_id)}/next", dict_of, params=params)


def preview(
    cron: str,
    *,
    timezone: str | None,
    count: int | None,
    start: datetime | str | None,
    dst_gap: str | None,
    dst_fold: str | None,
) -> Call[dict[str, Any]]:
    """``POST /cron/preview``: the fire times of any expression (the absent settings left out)."""
    body = {"cron": cron, "timezone": timezone, "count": count, "dstGap": dst_gap}
    body |= {"dstFold": dst_fold, "from": format_time(start) if start else None}
    return Call("POST", "/cron/preview", dict_of, body=given(body))


def retry(
    job_id: str, *, payload: Mapping[str, Any] | None, scheduled_at: datetime | str | None
) -> Call[Job]:
    """``POST /jobs/{id}/retry``, with a new payload and due time when given."""
    body: Filter = {}
    if payload is not None:
        body["payload"] = dict(payload)
    if scheduled_at is not None:
        body["scheduledAt"] = format_time(scheduled_at)
    return action(job_id, "retry", body)


def update(
    job_id: str,
    *,
    cron: str | None,
    payload: Mapping[str, Any] | None,
    priority: int | None,
    max_attempts: int | None,
    schedule: Mapping[str, Any],
) -> Call[Job]:
    """``PATCH /jobs/{id}``: the given settings (``schedule`` by their API names)."""
    changes = {"cron": cron, "payload": payload, "priority": priority, **schedule}
    changes["maxAttempts"] = max_attempts
    return Call("PATCH", f"/jobs/{job_id_of(job_id)}", job_of, body=given(changes))


# ------------------------------------------------------------------ waiting


@attrs.define(kw_only=True)
class Poll:
    """The bookkeeping of ``wait``: after each poll, how long to sleep before the next one,
    None once the job is final, WaitTimeout once ``timeout`` seconds of ``clock`` are spent."""

    job_id: str
    timeout: float
    interval: float
    clock: Callable[[], float]
    deadline: float = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.deadline = self.clock() + self.timeout

    def pause(self, job: Job) -> float | None:
        status = job.get("status")
        if status in FINAL_STATUSES:
            return None
        if self.clock() >= self.deadline:
            raise WaitTimeout(f"job {self.job_id} still {status} after {self.timeout:g}s")
        return min(self.interval, max(self.deadline - self.clock(), 0))
