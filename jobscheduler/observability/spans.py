"""The interface of tracing (:mod:`.tracing`): the spans a process can make, and
:data:`DISABLED`, the tracing of a process that makes none. No OpenTelemetry import here."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

#: Span attribute names.
JOB_ID = "jobscheduler.job.id"
JOB_TYPE = "jobscheduler.job.type"
TENANT = "jobscheduler.tenant"
ATTEMPT = "jobscheduler.attempt"
OUTCOME = "jobscheduler.outcome"
JOBS = "jobscheduler.jobs"
TEMPLATE_ID = "jobscheduler.template.id"
FIRE_AT = "jobscheduler.cron.fire_at"


class Job(Protocol):
    """What a span says of a job (a :class:`jobscheduler.domain.model.Job`; structural,
    since this layer does not import the domain)."""

    @property
    def id(self) -> str: ...
    @property
    def job_type(self) -> str: ...
    @property
    def tenant_id(self) -> str: ...
    @property
    def attempts(self) -> int: ...
    @property
    def trace_parent(self) -> str | None: ...


class Settings(Protocol):
    """The settings tracing reads (a :class:`jobscheduler.config.Settings`)."""

    @property
    def otel_sdk_disabled(self) -> bool: ...
    @property
    def otel_traces_exporter(self) -> str: ...
    @property
    def otel_exporter_otlp_endpoint(self) -> str: ...
    @property
    def otel_exporter_otlp_traces_endpoint(self) -> str: ...
    @property
    def otel_exporter_otlp_protocol(self) -> str: ...
    @property
    def otel_service_name(self) -> str: ...
    @property
    def worker_id(self) -> str: ...


class CreateSpan(Protocol):
    """The span of one create request (one job, or a batch)."""

    #: The ``traceparent`` the created jobs keep: this span's.
    traceparent: str

    def describe(self, jobs: Sequence[Job]) -> None:
        """Name the jobs created (their ids, type and tenant for one; a count for many)."""


class AttemptSpan(Protocol):
    """The span of one attempt; its context is the parent of the attempt's outcome span."""

    #: This span's ``traceparent``: what jobs enqueued by the handler keep.
    traceparent: str

    def failed(self, error_type: str, message: str) -> None:
        """The attempt failed: an error status with the failure's type and message."""


class FireSpan(Protocol):
    """The span of one cron fire time: the root of its run's trace."""

    traceparent: str

    def already_spawned(self) -> None:
        """The fire time's run was spawned before (this pass made nothing)."""


class Tracing:
    """Tracing switched off: :attr:`enabled` is False and nothing is ever traced.

    The enabled implementation (:class:`jobscheduler.observability._otel.OtelTracing`)
    overrides every method; call sites check :attr:`enabled` first, so these are never
    called on the hot path.
    """

    enabled: bool = False

    def create(self, route: str, received: str | None) -> AbstractContextManager[CreateSpan]:
        raise RuntimeError("tracing is disabled")

    def claimed(self, jobs: Sequence[Job], start_ns: int, end_ns: int) -> None:
        """One ``job.claim`` span per job, each from ``start_ns`` to ``end_ns``."""

    def attempt(self, job: Job) -> AbstractContextManager[AttemptSpan]:
        raise RuntimeError("tracing is disabled")

    def outcomes(
        self,
        outcomes: Sequence[tuple[AttemptSpan | None, Job, str]],
        start_ns: int,
        end_ns: int,
    ) -> None:
        """One ``job.outcome`` span per (attempt span, job, result label)."""

    def cron_fire(self, template: Job, fire_at: datetime) -> AbstractContextManager[FireSpan]:
        raise RuntimeError("tracing is disabled")

    def shutdown(self) -> None:
        """Export what is buffered and stop (bounded by the exporter's own timeouts)."""


#: The tracing of a process that makes no spans.
DISABLED = Tracing()
