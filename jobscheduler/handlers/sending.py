"""Sending a job request to the API, with retries: the :class:`JobSpec` a task handle makes,
and the ``POST /jobs`` and ``POST /jobs/batch`` calls that send it (batches cut to the API's
limits).

A create that meets a 503 (the store did not answer in time; the job may be stored or not)
or no answer at all is sent again with the same idempotency key until the connection's
``retry_for`` runs out; a handle that was given no key makes one first, so a retry can never
store the job twice. A retry answered 409 means the first try was stored: the stored job is
read and returned. ``enqueue`` returns only once its job is stored.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import attrs

from jobscheduler.errors import ApiUnreachable, DuplicateJob, ServiceUnavailable

if TYPE_CHECKING:
    from jobscheduler.client import AsyncClient, BatchAnswer, Client, Job

#: Most jobs one ``POST /jobs/batch`` takes (the API's MAX_BATCH).
MAX_BATCH = 1000
#: A batch request's body stays under the API's 1 MiB limit with this much to spare.
MAX_BATCH_BYTES = 900 * 1024
#: First and longest pause between retries of a create that met a 503 or no answer.
RETRY_DELAY_FIRST = 0.1
RETRY_DELAY_MAX = 2.0


@attrs.frozen(kw_only=True)
class JobSpec:
    """One job to enqueue, its options fixed: the same request on every retry (its key and
    due time included). Made by :meth:`~jobscheduler.handlers.tasks.TaskHandle.spec`, sent by
    ``enqueue_many``."""

    job_type: str
    payload: dict[str, Any]
    scheduled_at: str
    idempotency_key: str
    tenant_id: str | None = None
    priority: int | None = None
    max_attempts: int | None = None

    def arguments(self) -> dict[str, Any]:
        """The keywords of the client's ``create``/``job_body``."""
        return {
            "tenant_id": self.tenant_id,
            "payload": self.payload,
            "scheduled_at": self.scheduled_at,
            "idempotency_key": self.idempotency_key,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
        }

    def body(self) -> dict[str, Any]:
        """The ``POST /jobs`` body."""
        from jobscheduler.client import job_body

        return job_body(self.job_type, **self.arguments())


class _Retry:
    """When to send a create again after a 503 or no answer (see the module doc)."""

    def __init__(self, retry_for: float, now: float) -> None:
        self._deadline = now + retry_for
        self._delay = RETRY_DELAY_FIRST
        #: The request was sent more than once: a 409 may be its own first try.
        self.retried = False

    def pause(self, error: ServiceUnavailable | ApiUnreachable, now: float) -> float:
        """Seconds to wait before the next try; re-raises ``error`` when out of time."""
        delay = self._delay
        hint = getattr(error, "retry_after", None)
        if hint is not None:
            delay = max(delay, min(float(hint), RETRY_DELAY_MAX))
        if now + delay > self._deadline:
            raise error
        self._delay = min(self._delay * 2, RETRY_DELAY_MAX)
        self.retried = True
        return delay


def _chunks(specs: list[JobSpec]) -> list[list[dict[str, Any]]]:
    """Batch bodies of at most MAX_BATCH jobs and about MAX_BATCH_BYTES each."""
    import json

    chunks: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for spec in specs:
        body = spec.body()
        length = len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()) + 1
        if current and (len(current) == MAX_BATCH or size + length > MAX_BATCH_BYTES):
            chunks.append(current)
            current, size = [], 0
        current.append(body)
        size += length
    if current:
        chunks.append(current)
    return chunks


def create_retrying(client: Client, spec: JobSpec, retry_for: float) -> Job:
    """``POST /jobs`` for ``spec``, retried after a 503 or no answer (see the module doc)."""
    retry = _Retry(retry_for, time.monotonic())
    while True:
        try:
            return client.create(spec.job_type, **spec.arguments())
        except DuplicateJob as exc:
            if retry.retried and exc.existing_id:
                return client.get(exc.existing_id)  # our own first try was stored
            raise
        except (ServiceUnavailable, ApiUnreachable) as exc:
            time.sleep(retry.pause(exc, time.monotonic()))


async def create_retrying_async(client: AsyncClient, spec: JobSpec, retry_for: float) -> Job:
    """:func:`create_retrying` as a coroutine."""
    import anyio

    retry = _Retry(retry_for, anyio.current_time())
    while True:
        try:
            return await client.create(spec.job_type, **spec.arguments())
        except DuplicateJob as exc:
            if retry.retried and exc.existing_id:
                return await client.get(exc.existing_id)
            raise
        except (ServiceUnavailable, ApiUnreachable) as exc:
            await anyio.sleep(retry.pause(exc, anyio.current_time()))


def batch_retrying(
    client: Client, bodies: list[dict[str, Any]], retry_for: float
) -> list[BatchAnswer]:
    """``POST /jobs/batch`` of ``bodies``, retried after a 503 or no answer."""
    retry = _Retry(retry_for, time.monotonic())
    while True:
        try:
            return client.create_many(bodies)
        except (ServiceUnavailable, ApiUnreachable) as exc:
            time.sleep(retry.pause(exc, time.monotonic()))


async def batch_retrying_async(
    client: AsyncClient, bodies: list[dict[str, Any]], retry_for: float
) -> list[BatchAnswer]:
    """:func:`batch_retrying` as a coroutine."""
    import anyio

    retry = _Retry(retry_for, anyio.current_time())
    while True:
        try:
            return await client.create_many(bodies)
        except (ServiceUnavailable, ApiUnreachable) as exc:
            await anyio.sleep(retry.pause(exc, anyio.current_time()))


__all__ = [
    "MAX_BATCH",
    "JobSpec",
    "batch_retrying",
    "batch_retrying_async",
    "create_retrying",
    "create_retrying_async",
]
