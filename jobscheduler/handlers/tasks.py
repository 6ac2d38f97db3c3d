"""Task handles: what ``@registry.handler(...)`` returns, to enqueue jobs of its type from code.

    @registry.handler("send-email", validate=EMAIL_SCHEMA)
    async def send_email(ctx: JobContext) -> None: ...

    job = send_email.enqueue({"to": "ada@example.com", "subject": "Hi"}, tenant_id="acme")

The handle is still the function for everything else: calling it calls the function, and a
worker process finds it under the function's name (it pickles by reference, as the
function did). Its enqueue methods send ``POST /jobs`` (``enqueue_many``: ``POST
/jobs/batch``) through the registry's :class:`~jobscheduler.handlers.connection.Connection`
-- one client per process, reused -- after validating the request locally with the API's own
rules (:func:`jobscheduler.domain.validation.parse_create_request` with this handler's
validator), so a bad payload raises the API's :class:`~jobscheduler.errors.ValidationError`
without a round trip.

The request itself -- the :class:`~jobscheduler.handlers.sending.JobSpec` and sending it,
retried after a 503 or no answer until its job is stored -- is
:mod:`jobscheduler.handlers.sending`'s.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from jobscheduler.domain.durations import parse_duration
from jobscheduler.domain.validation import parse_create_request
from jobscheduler.errors import ValidationError

from .sending import MAX_BATCH as MAX_BATCH
from .sending import MAX_BATCH_BYTES as MAX_BATCH_BYTES
from .sending import RETRY_DELAY_FIRST as RETRY_DELAY_FIRST
from .sending import RETRY_DELAY_MAX as RETRY_DELAY_MAX
from .sending import JobSpec as JobSpec
from .sending import _chunks
from .sending import batch_retrying as batch_retrying
from .sending import batch_retrying_async as batch_retrying_async
from .sending import create_retrying as create_retrying
from .sending import create_retrying_async as create_retrying_async

if TYPE_CHECKING:
    from jobscheduler.client import BatchAnswer, Job

    from .connection import Connection
    from .schedules import Schedule


class _Registry(Protocol):
    """What a handle needs of its :class:`~jobscheduler.handlers.HandlerRegistry` (typed
    structurally: the registry module imports this one)."""

    @property
    def connection(self) -> Connection: ...

    def get(self, name: str) -> Any: ...

    def max_attempts_defaults(self) -> dict[str, int]: ...

    def schedule(self, name: str, *, cron: str, job_type: str, **options: Any) -> Schedule: ...


#: Used for local validation when the tenant is left to the API key.
_ANY_TENANT = "tenant"

When = datetime | str
Delay = float | int | timedelta | str


class SpecOptions(TypedDict, total=False):
    """The keywords of :meth:`TaskHandle.spec` after the payload (``enqueue`` and
    ``enqueue_many`` take them too)."""

    at: When | None
    delay: Delay | None
    key: str | None
    priority: int | None
    max_attempts: int | None
    tenant_id: str | None


def _seconds(delay: Delay) -> float:
    if isinstance(delay, timedelta):
        return delay.total_seconds()
    if isinstance(delay, str):
        return parse_duration(delay)
    if isinstance(delay, bool) or not isinstance(delay, int | float):
        raise ValidationError(
            f"delay: must be seconds, a timedelta or a duration like '30s', got {delay!r}"
        )
    return float(delay)


def _due(at: When | None, delay: Delay | None) -> str:
    """``scheduledAt`` for ``at`` or ``delay`` (due now without either)."""
    from jobscheduler.client._requests import format_time

    if at is not None and delay is not None:
        raise ValidationError("give at or delay, not both")
    if at is not None:
        return format_time(at)
    seconds = 0.0 if delay is None else _seconds(delay)
    if seconds < 0:
        raise ValidationError(f"delay: must not be negative, got {delay!r}")
    return format_time(datetime.now(UTC) + timedelta(seconds=seconds))


class TaskHandle:
    """A registered handler function that can also enqueue jobs of its type.

    Calling the handle calls the function. ``name`` is the job type; ``registry`` the
    :class:`~jobscheduler.handlers.HandlerRegistry` it belongs to (whose connection it sends
    through).
    """

    __wrapped__: Any
    __qualname__: str

    def __init__(self, registry: _Registry, name: str, func: Any) -> None:
        functools.update_wrapper(self, func)
        self.name = name
        self.registry = registry

    def __call__(self, ctx: Any) -> Any:
        return self.__wrapped__(ctx)

    def __reduce__(self) -> tuple[Any, ...]:
        # By reference, as the function was: a worker process imports the module and takes
        # what it holds under the function's name (this handle, or the function itself when
        # the decorator's result was not bound to that name; both call the function).
        return (_by_name, (self.__module__, self.__qualname__))

    def __repr__(self) -> str:
        return f"<task handle {self.name!r} of {self.__module__}.{self.__qualname__}>"

    @property
    def connection(self) -> Connection:
        return self.registry.connection

    # -- one job -------------------------------------------------------------------------

    def spec(
        self,
        payload: Mapping[str, Any] | None = None,
        *,
        at: When | None = None,
        delay: Delay | None = None,
        key: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        tenant_id: str | None = None,
    ) -> JobSpec:
        """The job :meth:`enqueue` would send, validated (ValidationError naming the field,
        with the API's own message). ``at`` (an aware datetime or RFC3339) or ``delay``
        (seconds, a timedelta or ``"30s"``) sets when it is due, else now; ``key`` is its
        idempotency key (default: a fresh one); ``tenant_id`` defaults to the connection's
        (``JOBSCHEDULER_TENANT``), else the API key's tenant."""
        spec = JobSpec(
            job_type=self.name,
            payload=dict(payload or {}),
            scheduled_at=_due(at, delay),
            idempotency_key=key if key is not None else f"client-{uuid.uuid4().hex}",
            tenant_id=tenant_id if tenant_id is not None else self.connection.tenant_id,
            priority=priority,
            max_attempts=max_attempts,
        )
        self.validate(spec)
        return spec

    def validate(self, spec: JobSpec) -> None:
        """Check ``spec`` as ``POST /jobs`` would (this job type's payload validator
        included); ValidationError with the API's message."""
        handler = self.registry.get(self.name)
        body = spec.body()
        if body.get("tenantId") is None:
            body["tenantId"] = _ANY_TENANT  # the API fills it from the key
        parse_create_request(
            body,
            now=datetime.now(UTC),
            job_types={self.name: handler.validate},
            max_attempts_defaults=self.registry.max_attempts_defaults(),
        )

    def enqueue(
        self,
        payload: Mapping[str, Any] | None = None,
        **options: Unpack[SpecOptions],
    ) -> Job:
        """Store a job of this type and return it as the API shows it (``GET /jobs/{id}``).

        Options as :meth:`spec`. Raises ValidationError before sending anything if the
        request is invalid; DuplicateJob if ``key`` is already used (on the first try);
        ServiceUnavailable or ApiUnreachable once retries ran out (``retry_for``).
        """
        spec = self.spec(payload, **options)
        return create_retrying(self.connection.client(), spec, self.connection.retry_for)

    async def enqueue_async(
        self,
        payload: Mapping[str, Any] | None = None,
        **options: Unpack[SpecOptions],
    ) -> Job:
        """:meth:`enqueue` as a coroutine (trio or asyncio)."""
        spec = self.spec(payload, **options)
        return await create_retrying_async(
            self.connection.async_client(), spec, self.connection.retry_for
        )

    # -- many jobs -----------------------------------------------------------------------

    def _specs(
        self, items: Iterable[Mapping[str, Any] | JobSpec], **options: Unpack[SpecOptions]
    ) -> list[JobSpec]:
        specs: list[JobSpec] = []
        for i, item in enumerate(items):
            if isinstance(item, JobSpec):
                if item.job_type != self.name:
                    raise ValidationError(
                        f"jobs[{i}]: a {item.job_type!r} job given to the {self.name!r} handle"
                    )
                specs.append(item)
                continue
            try:
                specs.append(self.spec(item, **options))
            except ValidationError as exc:
                raise ValidationError(f"jobs[{i}]: {exc}") from None
        return specs

    def enqueue_many(
        self, items: Iterable[Mapping[str, Any] | JobSpec], **options: Unpack[SpecOptions]
    ) -> list[BatchAnswer]:
        """Store many jobs of this type through ``POST /jobs/batch`` (1,000 per request);
        one answer per item, in order: ``{"status": 201, "job": ...}``, ``{"status": 409,
        "jobId": ...}`` or ``{"status": 400, "error": ...}``.

        An item is a payload (``options``, the keywords of :meth:`spec`, apply to each) or a
        :class:`JobSpec` from :meth:`spec`. Every item is validated before anything is sent
        (ValidationError naming ``jobs[i]``). A request answered 503 is sent again with the
        same keys; an entry its first try stored then answers 409 with its ``jobId``.
        """
        answers: list[BatchAnswer] = []
        client = self.connection.client()
        for chunk in _chunks(self._specs(items, **options)):
            answers.extend(batch_retrying(client, chunk, self.connection.retry_for))
        return answers

    async def enqueue_many_async(
        self, items: Iterable[Mapping[str, Any] | JobSpec], **options: Unpack[SpecOptions]
    ) -> list[BatchAnswer]:
        """:meth:`enqueue_many` as a coroutine."""
        answers: list[BatchAnswer] = []
        client = self.connection.async_client()
        for chunk in _chunks(self._specs(items, **options)):
            answers.extend(await batch_retrying_async(client, chunk, self.connection.retry_for))
        return answers

    # -- after -----------------------------------------------------------------------------

    def wait(self, job: Job | str, timeout: float = 60.0) -> Job:
        """Poll the job (or job id) until it is final; WaitTimeout after ``timeout`` s."""
        job_id = job if isinstance(job, str) else job["id"]
        return self.connection.client().wait(job_id, timeout=timeout)

    async def wait_async(self, job: Job | str, timeout: float = 60.0) -> Job:  # noqa: ASYNC109
        """:meth:`wait` as a coroutine (``timeout`` as the clients' ``wait`` takes it)."""
        job_id = job if isinstance(job, str) else job["id"]
        return await self.connection.async_client().wait(job_id, timeout=timeout)

    def schedule(self, name: str, *, cron: str, **options: Any) -> Schedule:
        """Declare a cron schedule of this job type (:meth:`HandlerRegistry.schedule`)."""
        return self.registry.schedule(name, cron=cron, job_type=self.name, **options)


def _by_name(module: str, qualname: str) -> Any:
    """The object ``module`` holds under ``qualname`` (how a handle unpickles)."""
    import importlib

    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


__all__ = ["MAX_BATCH", "JobSpec", "TaskHandle"]
