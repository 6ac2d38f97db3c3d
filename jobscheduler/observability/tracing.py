"""Traces from a request to a job's runs: optional OpenTelemetry spans.

With the ``otel`` extra installed (``pip install 'jobscheduler[otel]'``) and an exporter
configured by the standard variables (``OTEL_TRACES_EXPORTER``, or an
``OTEL_EXPORTER_OTLP_ENDPOINT``), each process makes these spans, all in the trace the job
belongs to (its :attr:`~jobscheduler.domain.model.Job.trace_parent`):

==================  ==========================================================================
``job.create``      ``POST /jobs`` and ``POST /jobs/batch`` (a child of the request's
                    ``traceparent``, when it sent one): the job keeps this span's context
``job.claim``       the scheduler's claim of the job (pending -> queued)
``job.attempt``     one attempt: the handler's run, from start to return (error status on a
                    failure); jobs the handler enqueues (``ctx.enqueue``) join its trace
``job.outcome``     the write of the attempt's outcome (``completed``, ``retried``, ``dlq``,
                    ``stale``, ...), a child of the attempt
``cron.fire``       a cron template's fire time: the root of a new trace per fire time,
                    linked to the template's own create; the run it spawns joins that trace
==================  ==========================================================================

Each carries ``jobscheduler.job.id``, ``jobscheduler.job.type``, ``jobscheduler.tenant`` and,
for an attempt, ``jobscheduler.attempt``.

Without the extra, with ``OTEL_SDK_DISABLED=true`` or with no exporter configured,
:func:`configure_tracing` returns :data:`DISABLED`: its ``enabled`` is False and every call
site checks that flag before doing anything else, so no span is made and no per-job work is
done beyond that check. (A ``traceparent`` a client sends is still kept with its job, so that
processes that do trace can join the trace.)

This module and :mod:`.spans` (the interface) import nothing from OpenTelemetry;
:mod:`._otel` (imported only when tracing is on) holds the SDK side. The one exception is
:func:`current_traceparent`, for the client: it reads the caller's current span through
``opentelemetry-api`` if the caller's program has it.
"""

from __future__ import annotations

import logging
from typing import Any

from .spans import DISABLED as DISABLED
from .spans import AttemptSpan as AttemptSpan
from .spans import CreateSpan as CreateSpan
from .spans import FireSpan as FireSpan
from .spans import Job as Job
from .spans import Settings as Settings
from .spans import Tracing as Tracing

log = logging.getLogger(__name__)


def tracing_wanted(settings: Settings) -> bool:
    """Whether the settings ask for spans: not ``OTEL_SDK_DISABLED``, and an exporter
    (``OTEL_TRACES_EXPORTER`` other than ``none``, or an OTLP endpoint)."""
    if settings.otel_sdk_disabled or settings.otel_traces_exporter == "none":
        return False
    return bool(
        settings.otel_traces_exporter
        or settings.otel_exporter_otlp_endpoint
        or settings.otel_exporter_otlp_traces_endpoint
    )


def configure_tracing(settings: Settings, *, role: str, provider: Any = None) -> Tracing:
    """The tracing of one process: :data:`DISABLED` unless the settings ask for spans
    (:func:`tracing_wanted`) and the ``otel`` extra is installed (a warning says so when it
    is not). ``provider`` (an SDK ``TracerProvider``) replaces the one built from the
    settings (tests give one with an in-memory exporter)."""
    if provider is None and not tracing_wanted(settings):
        return DISABLED
    try:
        from . import _otel
    except ImportError as exc:
        log.warning(
            "tracing asked for but OpenTelemetry is not installed "
            "(pip install 'jobscheduler[otel]'); no spans are made",
            extra={"error": str(exc)},
        )
        return DISABLED
    return _otel.OtelTracing.from_settings(settings, role=role, provider=provider)


#: ``opentelemetry.trace`` once looked for: the module, or False when it is not installed.
_trace_api: Any = None


def current_traceparent() -> str | None:
    """The ``traceparent`` of the caller's current span, if its program uses OpenTelemetry
    (``opentelemetry-api`` installed and a valid span current), else None. For the client:
    jobs enqueued from code join the trace of the code that enqueued them. The import is
    tried once per process."""
    global _trace_api
    if _trace_api is None:
        try:
            from opentelemetry import trace
        except ImportError:
            _trace_api = False
        else:
            _trace_api = trace
    if _trace_api is False:
        return None
    context = _trace_api.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
