"""What the sync and async clients share: one :class:`Call` per operation (method, path,
query, body, and how to read the answer, error answers through :mod:`._errors`), the
bookkeeping of ``wait`` (:class:`Poll`) and the client's types. No I/O happens here: each
client only sends a call (``_send``), follows the pages and sleeps between polls."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, TypedDict, TypeVar, Unpack, cast

import attrs
import httpx

from jobscheduler.config import ClientSettings
from jobscheduler.errors import WaitTimeout

from ._errors import raise_for_status

T = TypeVar("T")

#: Statuses a job never leaves (``wait`` returns on them).
FINAL_STATUSES = frozenset({"completed", "dlq", "cancelled", "failed"})


class Job(TypedDict, total=False):
    """A job as the API shows it (``GET /jobs/{id}``); optional fields may be absent."""

    id: str
    idempotencyKey: str
    tenantId: str
    jobType: str
    payload: dict[str, Any]
    priority: int
    status: str
    scheduledAt: str
    cron: str
    timezone: str
    claimedBy: str
    claimedAt: str
    attempts: int
    maxAttempts: int
    lastError: str
    result: Any
    templateId: str
    createdAt: str
    updatedAt: str


class BatchAnswer(TypedDict, total=False):
    """One answer of ``create_many``: status 201 with ``job``, 409 with ``jobId``, or 400."""

    status: int
    job: Job
    jobId: str
    error: str


Filter = dict[str, Any]
# Aliases for the clients' return types: inside a client class, ``list`` names the method.
Page = list[Job]
Answers = list[BatchAnswer]
Records = list[dict[str, Any]]


@attrs.frozen
class Call(Generic[T]):
    """One HTTP request and how its successful answer becomes a value."""

    method: str
    path: str
    decode: Callable[[httpx.Response], T]
    params: Sequence[tuple[str, str]] = ()
    body: Any = None
    #: A 409 here means the idempotencyKey is taken (DuplicateJob), not a state conflict.
    creates: bool = False

    def request(self) -> dict[str, Any]:
        """The keywords of ``httpx.Client.request`` (and ``AsyncClient.request``) for it."""
        options: dict[str, Any] = {"method": self.method, "url": self.path}
        # No params at all, not an empty list: that would drop the query of a next-page URL.
        if self.params:
            options["params"] = list(self.params)
        if self.method not in ("GET", "DELETE"):
            options["json"] = self.body if self.body is not None else {}
        return options

    def answer(self, response: httpx.Response) -> T:
        """The value of a successful answer; the project's exception for an error answer."""
        raise_for_status(response, creates=self.creates)
        return self.decode(response)


def _json(response: httpx.Response) -> Any:
    return response.json()


def _job(response: httpx.Response) -> Job:
    return cast(Job, response.json())


def _dict(response: httpx.Response) -> dict[str, Any]:
    return cast(dict[str, Any], response.json())


def connection(base_url: str | None, api_key: str | None) -> tuple[str, dict[str, str]]:
    """The base URL and headers: arguments win over JOBSCHEDULER_URL/JOBSCHEDULER_API_KEY."""
    env = ClientSettings.from_env()
    url = (base_url or env.url).rstrip("/")
    key = api_key if api_key is not None else env.api_key
    headers = {"Accept": "application/json", "User-Agent": "jobscheduler-client"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return url, headers


def format_time(value: datetime | str) -> str:
    """RFC3339 in UTC; a naive datetime is refused (its zone would be a guess)."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("a timezone-aware datetime is needed (e.g. datetime.now(UTC))")
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def job_body(
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
) -> dict[str, Any]:
    """A ``POST /jobs`` body. Without ``scheduled_at`` or ``cron`` the job is due now;
    without ``idempotency_key`` a random one is used (pass your own to retry safely).
    ``schedule`` takes a template's settings by their API names (``timezone``, ``catchUp``,
    ``jitter``, ...)."""
    body: dict[str, Any] = {
        "idempotencyKey": idempotency_key or f"client-{uuid.uuid4().hex}",
        "tenantId": tenant_id,
        "jobType": job_type,
    }
    if payload is not None:
        body["payload"] = dict(payload)
    if cron is not None:
        body["cron"] = cron
    else:
        body["scheduledAt"] = format_time(scheduled_at or datetime.now(UTC))
    if priority is not None:
        body["priority"] = priority
    if max_attempts is not None:
        body["maxAttempts"] = max_attempts
    body.update({k: v for k, v in schedule.items() if v is not None})
    return body


#: Accepted ``sort`` values of ``GET /jobs`` (the API's names): newest first (the default),
#: oldest first, soonest due first, latest due first.
SORTS = ("-createdAt", "createdAt", "scheduledAt", "-scheduledAt")
#: Most ids one bulk request may name (``filter.ids``).
MAX_BULK_IDS = 1000


class Selection(TypedDict, total=False):
    """The filter keywords shared by listing and bulk actions (Python names)."""

    status: str | Sequence[str] | None
    job_type: str | None
    template_id: str | None
    cron: bool | None
    created_after: datetime | str | None
    created_before: datetime | str | None
    #: Exactly this idempotencyKey.
    idempotency_key: str | None
    #: Keys starting with this text (not with ``idempotency_key``).
    idempotency_key_prefix: str | None


class ListOptions(Selection, total=False):
    """The keywords of ``list``/``pages``: a :class:`Selection`, the order and page size."""

    #: One of :data:`SORTS`; the API's default is ``-createdAt`` (newest first).
    sort: str | None
    page_size: int | None


def _text(value: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name}: must be a non-empty string")
    return value


def job_filter(
    *,
    tenant_id: str | None = None,
    status: str | Sequence[str] | None = None,
    job_type: str | None = None,
    template_id: str | None = None,
    cron: bool | None = None,
    created_after: datetime | str | None = None,
    created_before: datetime | str | None = None,
    idempotency_key: str | None = None,
    idempotency_key_prefix: str | None = None,
) -> Filter:
    """A filter in the API's names (the query of ``GET /jobs``, the body of bulk actions)."""
    out: Filter = {}
    if tenant_id is not None:
        out["tenantId"] = tenant_id
    if status is not None:
        out["status"] = [status] if isinstance(status, str) else list(status)
    if job_type is not None:
        out["jobType"] = job_type
    if template_id is not None:
        out["templateId"] = template_id
    if cron is not None:
        out["cron"] = cron
    if created_after is not None:
        out["createdAfter"] = format_time(created_after)
    if created_before is not None:
        out["createdBefore"] = format_time(created_before)
    if idempotency_key is not None and idempotency_key_prefix is not None:
        raise ValueError("give idempotency_key or idempotency_key_prefix, not both")
    if idempotency_key is not None:
        out["idempotencyKey"] = _text(idempotency_key, "idempotency_key")
    if idempotency_key_prefix is not None:
        out["idempotencyKeyPrefix"] = _text(idempotency_key_prefix, "idempotency_key_prefix")
    return out


def list_params(
    tenant_id: str | None,
    *,
    sort: str | None = None,
    page_size: int | None = None,
    **selection: Unpack[Selection],
) -> list[tuple[str, str]]:
    """The query of the first ``GET /jobs`` page: the filter, ``sort`` and ``limit``."""
    values = job_filter(tenant_id=tenant_id, **selection)
    if sort is not None:
        if sort not in SORTS:
            raise ValueError(f"sort: unknown order {sort!r} (accepted: {', '.join(SORTS)})")
        values["sort"] = sort
    if page_size is not None:
        values["limit"] = page_size
    return query_of(values)


def bulk_ids(ids: Iterable[str] | None) -> list[str] | None:
    """``filter.ids``: 1 to :data:`MAX_BULK_IDS` job ids (a lone string is refused: it
    would read as one id per character)."""
    if ids is None:
        return None
    if isinstance(ids, str):
        raise ValueError("ids: give a list of job ids, not one string")
    chosen = [_id(job_id) for job_id in ids]
    if not chosen:
        raise ValueError("ids: give at least one job id")
    if len(chosen) > MAX_BULK_IDS:
        raise ValueError(f"ids: at most {MAX_BULK_IDS} per request, got {len(chosen)}")
    return chosen


def query_of(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Query pairs: lists repeat the name, booleans are ``true``/``false``."""
    pairs: list[tuple[str, str]] = []
    for name, value in values.items():
        items = value if isinstance(value, list) else [value]
        for item in items:
            text = ("true" if item else "false") if isinstance(item, bool) else str(item)
            pairs.append((name, text))
    return pairs


def next_page(response: httpx.Response) -> str | None:
    """The URL of the next page from the ``Link: <...>; rel="next"`` header, if any."""
    link = response.links.get("next")
    return link.get("url") if link else None


@attrs.frozen
class Paged(Generic[T]):
    """One page of a listing and the call that reads the next one (None after the last),
    from its ``Link: rel="next"`` header; both clients loop ``page = call(page.next)``."""

    items: list[T]
    next: Call[Paged[T]] | None


def _paged(
    url: str, items_of: Callable[[Any], list[T]], params: Sequence[tuple[str, str]] = ()
) -> Call[Paged[T]]:
    """The ``GET`` of one page; ``items_of`` takes the items out of its JSON body."""

    def decode(response: httpx.Response) -> Paged[T]:
        following = next_page(response)
        return Paged(
            items=items_of(response.json()),
            next=None if following is None else _paged(following, items_of),
        )

    return Call("GET", url, decode, params=params)


def _jobs_of(body: Any) -> list[Job]:
    return cast(list[Job], body)


def listing(tenant_id: str | None, **options: Unpack[ListOptions]) -> Call[Paged[Job]]:
    """The first page of ``GET /jobs`` (a JSON list of jobs)."""
    return _paged("/jobs", _jobs_of, list_params(tenant_id, **options))


# ------------------------------------------------------------------ the operations


def _id(job_id: str) -> str:
    if not isinstance(job_id, str) or not job_id or "/" in job_id:
        raise ValueError(f"not a job id: {job_id!r}")
    return job_id


def create(body: Mapping[str, Any]) -> Call[Job]:
    return Call("POST", "/jobs", _job, body=dict(body), creates=True)


def create_many(bodies: Iterable[Mapping[str, Any]]) -> Call[list[BatchAnswer]]:
    def decode(response: httpx.Response) -> list[BatchAnswer]:
        return cast(list[BatchAnswer], response.json()["results"])

    return Call("POST", "/jobs/batch", decode, body={"jobs": [dict(b) for b in bodies]})


def get(job_id: str) -> Call[Job]:
    return Call("GET", f"/jobs/{_id(job_id)}", _job)


def attempts(job_id: str) -> Call[list[dict[str, Any]]]:
    def decode(response: httpx.Response) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], response.json()["attempts"])

    return Call("GET", f"/jobs/{_id(job_id)}/attempts", decode)


def action(job_id: str, name: str, body: Mapping[str, Any] | None = None) -> Call[Job]:
    """``POST /jobs/{id}/<name>`` (cancel, retry, pause, resume, trigger): the job after it."""
    return Call("POST", f"/jobs/{_id(job_id)}/{name}", _job, body=dict(body or {}))


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
    return Call("POST", f"/jobs/{name}", _dict, body=body)


def delete(job_id: str) -> Call[Job]:
    return Call("DELETE", f"/jobs/{_id(job_id)}", _job)


def stats(tenant_id: str | None) -> Call[dict[str, Any]]:
    params = [("tenantId", tenant_id)] if tenant_id else []
    return Call("GET", "/stats", _dict, params=params)


def _occurrences_of(body: Any) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], body["occurrences"])


def occurrences(job_id: str, page_size: int | None) -> Call[Paged[dict[str, Any]]]:
    """The first page of a template's ledger, ``GET /jobs/{id}/occurrences``."""
    params = [("limit", str(page_size))] if page_size is not None else []
    return _paged(f"/jobs/{_id(job_id)}/occurrences", _occurrences_of, params)


def next_fires(job_id: str, count: int | None) -> Call[dict[str, Any]]:
    params = [("count", str(count))] if count is not None else []
    return Call("GET", f"/jobs/{_id(job_id)}/next", _dict, params=params)


def _given(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


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
    return Call("POST", "/cron/preview", _dict, body=_given(body))


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
    return Call("PATCH", f"/jobs/{_id(job_id)}", _job, body=_given(changes))


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
