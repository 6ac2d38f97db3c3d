"""The OpenTelemetry side of :mod:`.tracing`: spans made with the SDK (the ``otel`` extra).

Imported only when tracing is on. The process owns its ``TracerProvider`` (not the global
one, which an app embedding the roles may have set for itself): a batch span processor in
front of the exporter the settings name (OTLP over HTTP/protobuf or gRPC, whose endpoint,
headers and timeouts the exporter reads from the standard ``OTEL_EXPORTER_OTLP_*``
variables; or the console). Parents come from the ``traceparent`` a job keeps, turned into
a remote span context without a propagator round trip.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from .spans import (
    ATTEMPT,
    FIRE_AT,
    JOB_ID,
    JOB_TYPE,
    JOBS,
    OUTCOME,
    TEMPLATE_ID,
    TENANT,
    AttemptSpan,
    CreateSpan,
    FireSpan,
    Job,
    Settings,
    Tracing,
)
from .tracecontext import format_traceparent, parse_traceparent

INSTRUMENTATION = "jobscheduler"


def span_context_of(traceparent: str | None) -> SpanContext | None:
    """The remote span context a stored ``traceparent`` names, or None."""
    parsed = parse_traceparent(traceparent)
    if parsed is None:
        return None
    return SpanContext(
        trace_id=parsed.trace_id,
        span_id=parsed.span_id,
        is_remote=True,
        trace_flags=TraceFlags(parsed.flags),
    )


def parent_of(traceparent: str | None) -> Context | None:
    """A context whose current span is the one ``traceparent`` names (None: a new trace)."""
    context = span_context_of(traceparent)
    return None if context is None else trace.set_span_in_context(NonRecordingSpan(context))


def traceparent_of(span: Span) -> str:
    context = span.get_span_context()
    return format_traceparent(context.trace_id, context.span_id, int(context.trace_flags))


def _job_attributes(job: Job) -> dict[str, Any]:
    return {JOB_ID: job.id, JOB_TYPE: job.job_type, TENANT: job.tenant_id}


def exporter_of(settings: Settings) -> SpanExporter:
    """The exporter ``OTEL_TRACES_EXPORTER`` / ``OTEL_EXPORTER_OTLP_PROTOCOL`` name, sending
    to the endpoint the settings hold (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as it is, else
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` plus ``/v1/traces`` over HTTP, as the specification
    says); the exporter reads its other variables (headers, timeouts) itself."""
    if settings.otel_traces_exporter == "console":
        return ConsoleSpanExporter()
    traces = settings.otel_exporter_otlp_traces_endpoint or None
    base = settings.otel_exporter_otlp_endpoint or None
    if settings.otel_exporter_otlp_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=traces or base)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if traces is None and base is not None:
        traces = base.rstrip("/") + "/v1/traces"
    return OTLPSpanExporter(endpoint=traces)


class _Create:
    def __init__(self, span: Span) -> None:
        self.span = span
        self.traceparent = traceparent_of(span)

    def describe(self, jobs: Sequence[Job]) -> None:
        if len(jobs) == 1:
            self.span.set_attributes(_job_attributes(jobs[0]))
        else:
            self.span.set_attribute(JOBS, len(jobs))


class _Attempt:
    def __init__(self, span: Span) -> None:
        self.span = span
        self.context = span.get_span_context()
        self.traceparent = traceparent_of(span)

    def failed(self, error_type: str, message: str) -> None:
        self.span.set_status(Status(StatusCode.ERROR, f"{error_type}: {message}"[:500]))


class _Fire:
    def __init__(self, span: Span) -> None:
        self.span = span
        self.traceparent = traceparent_of(span)

    def already_spawned(self) -> None:
        self.span.set_attribute("jobscheduler.cron.already_spawned", True)


class OtelTracing(Tracing):
    """Spans of jobs, made with one SDK tracer (see :mod:`.tracing` for which)."""

    enabled = True

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self._tracer = provider.get_tracer(INSTRUMENTATION)

    @classmethod
    def from_settings(
        cls, settings: Settings, *, role: str, provider: TracerProvider | None = None
    ) -> OtelTracing:
        if provider is None:
            resource = Resource.create(
                {
                    "service.name": settings.otel_service_name,
                    "service.instance.id": settings.worker_id,
                    "jobscheduler.role": role,
                }
            )
            provider = TracerProvider(resource=resource)
            provider.add_span_processor(BatchSpanProcessor(exporter_of(settings)))
        return cls(provider)

    @contextmanager
    def create(self, route: str, received: str | None) -> Iterator[CreateSpan]:
        with self._tracer.start_as_current_span(
            f"job.create {route}", context=parent_of(received), kind=SpanKind.SERVER
        ) as span:
            yield _Create(span)

    def claimed(self, jobs: Sequence[Job], start_ns: int, end_ns: int) -> None:
        tracer = self._tracer
        for job in jobs:
            span = tracer.start_span(
                "job.claim",
                context=parent_of(job.trace_parent),
                kind=SpanKind.PRODUCER,
                attributes=_job_attributes(job),
                start_time=start_ns,
            )
            span.end(end_time=end_ns)

    @contextmanager
    def attempt(self, job: Job) -> Iterator[AttemptSpan]:
        attributes = _job_attributes(job)
        attributes[ATTEMPT] = job.attempts
        # Not made current: a handler's own spans nest under it only if it asks for them.
        span = self._tracer.start_span(
            "job.attempt",
            context=parent_of(job.trace_parent),
            kind=SpanKind.CONSUMER,
            attributes=attributes,
        )
        try:
            yield _Attempt(span)
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()

    def outcomes(
        self,
        outcomes: Sequence[tuple[AttemptSpan | None, Job, str]],
        start_ns: int,
        end_ns: int,
    ) -> None:
        tracer = self._tracer
        for attempt, job, label in outcomes:
            if not isinstance(attempt, _Attempt):
                continue
            attributes = _job_attributes(job)
            attributes[OUTCOME] = label
            span = tracer.start_span(
                "job.outcome",
                context=trace.set_span_in_context(NonRecordingSpan(attempt.context)),
                attributes=attributes,
                start_time=start_ns,
            )
            span.end(end_time=end_ns)

    @contextmanager
    def cron_fire(self, template: Job, fire_at: datetime) -> Iterator[FireSpan]:
        created = span_context_of(template.trace_parent)
        links = [Link(created)] if created is not None else []
        attributes = _job_attributes(template)
        attributes[TEMPLATE_ID] = attributes.pop(JOB_ID)
        attributes[FIRE_AT] = fire_at.isoformat()
        with self._tracer.start_as_current_span(
            "cron.fire",
            context=Context(),  # a new trace per fire time
            links=links,
            attributes=attributes,
            kind=SpanKind.INTERNAL,
        ) as span:
            yield _Fire(span)

    def shutdown(self) -> None:
        self.provider.shutdown()
