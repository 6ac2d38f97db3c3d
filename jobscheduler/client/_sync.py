"""The blocking client (httpx.Client)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar, Unpack

import httpx

from . import _operations as core
from ._call import Call, Paged, connection
from ._errors import unreachable
from ._requests import job_body
from ._types import Answers, Job, ListOptions, Page, Records, Selection

T = TypeVar("T")


class Client:
    """A blocking client of the jobscheduler HTTP API; one method per operation.

    ``base_url`` and ``api_key`` default to ``JOBSCHEDULER_URL`` (else
    ``http://127.0.0.1:8080``) and ``JOBSCHEDULER_API_KEY``. Error answers raise the
    project's exceptions (:mod:`jobscheduler.errors`): ValidationError (400), Unauthorized
    (401), Forbidden (403), JobNotFound (404), DuplicateJob (409 on create, with
    ``existing_id``), InvalidTransition (other 409s), RateLimited (429), ServiceUnavailable (503);
    ApiUnreachable when the API cannot be reached. Use it as a context manager or call
    :meth:`close`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        url, headers = connection(base_url, api_key)
        self.base_url = url
        self._http = httpx.Client(
            base_url=url, headers=headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[T]) -> T:
        try:
            response = self._http.request(**call.request())
        except httpx.TransportError as exc:
            raise unreachable(self.base_url, exc) from exc
        return call.answer(response)

    # ------------------------------------------------------------ creating

    def create(
        self,
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
    ) -> Job:
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
        return self._send(core.create(body))

    def create_many(self, bodies: Iterable[Mapping[str, Any]]) -> Answers:
        """Create up to 1,000 jobs in one request (bodies from :func:`job_body`); one answer
        per body, in order."""
        return self._send(core.create_many(bodies))

    # ------------------------------------------------------------ reading

    def get(self, job_id: str) -> Job:
        """The job by its id; JobNotFound when there is none."""
        return self._send(core.get(job_id))

    def attempts(self, job_id: str) -> Records:
        """The job's attempt history, oldest first."""
        return self._send(core.attempts(job_id))

    def pages(self, tenant_id: str | None = None, **options: Unpack[ListOptions]) -> Iterator[Page]:
        """Pages of matching jobs following the ``Link: rel="next"`` cursor: newest first
        unless ``sort`` (one of :data:`SORTS`). Filters: ``status``, ``job_type``,
        ``template_id``, ``cron``, ``created_after``/``created_before``, ``idempotency_key``
        (exact) or ``idempotency_key_prefix``; ``page_size`` is the API's ``limit``."""
        call: Call[Paged[Job]] | None = core.listing(tenant_id, **options)
        while call is not None:
            page = self._send(call)
            yield page.items
            call = page.next

    def list(self, tenant_id: str | None = None, **options: Unpack[ListOptions]) -> Iterator[Job]:
        """Every matching job (the keywords of :meth:`pages`), fetched a page at a time."""
        for page in self.pages(tenant_id, **options):
            yield from page

    def stats(self, tenant_id: str | None = None) -> dict[str, Any]:
        """Counts by status and job type, queue lag, recent completions and failures."""
        return self._send(core.stats(tenant_id))

    def occurrences(self, job_id: str, *, page_size: int | None = None) -> Iterator[dict[str, Any]]:
        """A cron template's ledger, newest fire time first, fetched a page at a time: each
        fire time and what became of it (``spawned``/``buffered`` with its run, or
        ``skipped`` with a reason). ``page_size`` is the API's ``limit`` (50; at most 500)."""
        call: Call[Paged[dict[str, Any]]] | None = core.occurrences(job_id, page_size)
        while call is not None:
            page = self._send(call)
            yield from page.items
            call = page.next

    def next(self, job_id: str, count: int | None = None) -> dict[str, Any]:
        """A cron template's next fire times."""
        return self._send(core.next_fires(job_id, count))

    def preview(
        self,
        cron: str,
        *,
        timezone: str | None = None,
        count: int | None = None,
        start: datetime | str | None = None,
        dst_gap: str | None = None,
        dst_fold: str | None = None,
    ) -> dict[str, Any]:
        """The fire times of any expression (nothing is stored)."""
        call = core.preview(
            cron, timezone=timezone, count=count, start=start, dst_gap=dst_gap, dst_fold=dst_fold
        )
        return self._send(call)

    def wait(self, job_id: str, timeout: float = 60.0, *, interval: float = 0.2) -> Job:
        """Poll until the job is final (completed, dlq, cancelled); WaitTimeout otherwise."""
        poll = core.Poll(job_id=job_id, timeout=timeout, interval=interval, clock=time.monotonic)
        while True:
            job = self.get(job_id)
            pause = poll.pause(job)  # WaitTimeout past the deadline
            if pause is None:
                return job
            time.sleep(pause)

    # ------------------------------------------------------------ acting

    def cancel(self, job_id: str) -> Job:
        """Cancel a job (a running one gets a cancel request); InvalidTransition if it is final."""
        return self._send(core.action(job_id, "cancel"))

    def retry(
        self,
        job_id: str,
        *,
        payload: Mapping[str, Any] | None = None,
        scheduled_at: datetime | str | None = None,
    ) -> Job:
        """Run a dlq or cancelled job again (now, or at ``scheduled_at``), optionally with a
        new payload."""
        return self._send(core.retry(job_id, payload=payload, scheduled_at=scheduled_at))

    def bulk_cancel(
        self,
        tenant_id: str | None = None,
        *,
        ids: Iterable[str] | None = None,
        dry_run: bool = False,
        **selection: Unpack[Selection],
    ) -> dict[str, Any]:
        """Cancel every job matching the filter (the filter keywords of :meth:`pages`) and,
        with ``ids`` (at most 1,000), among those jobs; ``dry_run`` only counts the matches."""
        return self._send(core.bulk("cancel", tenant_id, ids=ids, dry_run=dry_run, **selection))

    def bulk_retry(
        self,
        tenant_id: str | None = None,
        *,
        ids: Iterable[str] | None = None,
        dry_run: bool = False,
        scheduled_at: datetime | str | None = None,
        **selection: Unpack[Selection],
    ) -> dict[str, Any]:
        """Retry every dlq/cancelled job matching the filter (as :meth:`bulk_cancel`), due
        now or at ``scheduled_at``; ``dry_run`` only counts the matches."""
        call = core.bulk(
            "retry", tenant_id, ids=ids, dry_run=dry_run, scheduled_at=scheduled_at, **selection
        )
        return self._send(call)

    def pause(self, job_id: str) -> Job:
        """Pause a cron template: it fires no more until resumed."""
        return self._send(core.action(job_id, "pause"))

    def resume(self, job_id: str) -> Job:
        """Resume a paused template; it fires next from now (no burst of missed runs)."""
        return self._send(core.action(job_id, "resume"))

    def trigger(self, job_id: str) -> Job:
        """Run a template once now (its own instance key)."""
        return self._send(core.action(job_id, "trigger"))

    def update(
        self,
        job_id: str,
        *,
        cron: str | None = None,
        payload: Mapping[str, Any] | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        **schedule: Any,
    ) -> Job:
        """Change a template's expression, payload, priority, maxAttempts or schedule
        settings (``timezone``, ``catchUp``, ``jitter``, ... by their API names); its next
        fire time is recomputed."""
        call = core.update(
            job_id,
            cron=cron,
            payload=payload,
            priority=priority,
            max_attempts=max_attempts,
            schedule=schedule,
        )
        return self._send(call)

    def delete(self, job_id: str) -> Job:
        """Retire a template (its past runs stay)."""
        return self._send(core.delete(job_id))
