"""Traces of a job's life (``observability/tracing.py``), role by role, with the SDK's
in-memory exporter: the create's span continues the request's ``traceparent`` and the job
keeps its context; the claim, the attempt and its outcome join that trace; ctx.enqueue's
jobs join the attempt's; a cron fire time starts a trace of its own, linked to the
template's creation. And when tracing is off: no span, the received ``traceparent`` kept."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from jobscheduler.client import Client
from jobscheduler.config import Settings
from jobscheduler.handlers import JobContext
from jobscheduler.observability import tracing as tracing_module
from jobscheduler.observability.tracecontext import parse_traceparent
from jobscheduler.observability.tracing import DISABLED, Tracing, configure_tracing
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore

from .api_support import Api, api_deps, create_body, serve
from .conftest import BASE, DepsFactory, make_job
from .roles_support import queue, registry_with, wake_up

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
CALLER_TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736
CALLER_SPAN = 0x00F067AA0BA902B7


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracing(exporter: InMemorySpanExporter) -> Iterator[Tracing]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = configure_tracing(Settings(), role="test", provider=provider)
    yield traced
    provider.shutdown()


def spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith(name)]


def ids_of(traceparent: str | None) -> tuple[int, int]:
    parsed = parse_traceparent(traceparent)
    assert parsed is not None, traceparent
    return parsed.trace_id, parsed.span_id


def context_ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def parent_ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.parent is not None
    return span.parent.trace_id, span.parent.span_id


@pytest.fixture(params=["fast", "quart"])
async def traced_api(
    make_deps: DepsFactory, tracing: Tracing, request: pytest.FixtureRequest
) -> AsyncIterator[Api]:
    deps = attrs.evolve(api_deps(make_deps), tracing=tracing)
    async with serve(deps, request.param) as served:
        yield served


# ----------------------------------------------------------------------- configuration


def test_tracing_is_off_unless_an_exporter_is_configured() -> None:
    assert configure_tracing(Settings(), role="api") is DISABLED
    assert not DISABLED.enabled


def test_otel_sdk_disabled_wins_over_a_configured_endpoint() -> None:
    settings = Settings.from_env(
        {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    )
    assert configure_tracing(settings, role="api") is DISABLED


def test_an_otlp_endpoint_turns_tracing_on() -> None:
    settings = Settings.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    traced = configure_tracing(settings, role="api")
    try:
        assert traced.enabled
    finally:
        traced.shutdown()


def test_without_the_extra_tracing_stays_off_and_the_client_sends_no_traceparent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jobscheduler.observability as package

    monkeypatch.setitem(sys.modules, "jobscheduler.observability._otel", None)
    monkeypatch.delattr(package, "_otel", raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.setattr(tracing_module, "_trace_api", None)
    settings = Settings.from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert configure_tracing(settings, role="api") is DISABLED
    assert tracing_module.current_traceparent() is None


# ----------------------------------------------------------------------- the API


async def test_a_create_continues_the_request_trace_and_the_job_keeps_the_create_span(
    traced_api: Api, exporter: InMemorySpanExporter
) -> None:
    reply = await traced_api.request(
        "POST", "/jobs", json=create_body(), headers={"traceparent": CALLER}
    )
    assert reply.status == 201, reply.text
    [span] = spans(exporter, "job.create")
    assert parent_ids(span) == (CALLER_TRACE, CALLER_SPAN)
    job = await traced_api.deps.store.get(reply.json["id"])
    assert ids_of(job.trace_parent) == context_ids(span)
    assert span.attributes is not None
    assert span.attributes["jobscheduler.job.id"] == job.id
    assert span.attributes["jobscheduler.tenant"] == "tenant-a"
    assert span.attributes["jobscheduler.job.type"] == "log-message"
    assert "traceparent" not in reply.json  # not part of the job's JSON


async def test_a_create_without_traceparent_starts_a_trace_the_job_keeps(
    traced_api: Api, exporter: InMemorySpanExporter
) -> None:
    reply = await traced_api.create(create_body())
    assert reply.status == 201, reply.text
    [span] = spans(exporter, "job.create")
    assert span.parent is None
    job = await traced_api.deps.store.get(reply.json["id"])
    assert ids_of(job.trace_parent) == context_ids(span)


async def test_every_job_of_a_batch_keeps_the_batch_span(
    traced_api: Api, exporter: InMemorySpanExporter
) -> None:
    bodies = [create_body(idempotencyKey=f"b-{i}") for i in range(3)]
    reply = await traced_api.request(
        "POST", "/jobs/batch", json={"jobs": bodies}, headers={"traceparent": CALLER}
    )
    assert reply.status == 200, reply.text
    [span] = spans(exporter, "job.create")
    assert parent_ids(span) == (CALLER_TRACE, CALLER_SPAN)
    assert span.attributes is not None
    assert span.attributes["jobscheduler.jobs"] == 3
    for answer in reply.json["results"]:
        job = await traced_api.deps.store.get(answer["job"]["id"])
        assert ids_of(job.trace_parent) == context_ids(span)


async def test_with_tracing_off_the_received_traceparent_is_kept_and_a_bad_one_ignored(
    api: Api,
) -> None:
    good = await api.request(
        "POST", "/jobs", json=create_body(), headers={"traceparent": CALLER.upper()}
    )
    bad = await api.request(
        "POST",
        "/jobs",
        json=create_body(idempotencyKey="other"),
        headers={"traceparent": "00-zz-not-a-trace"},
    )
    assert (good.status, bad.status) == (201, 201)
    assert (await api.deps.store.get(good.json["id"])).trace_parent == CALLER
    assert (await api.deps.store.get(bad.json["id"])).trace_parent is None


# ----------------------------------------------------------------------- the roles


@attrs.frozen
class TracedRoles:
    """The roles' set-up: the store and Deps that trace into ``exporter`` (a test asks for
    ``autojump_clock`` itself: pytest-trio runs in virtual time only on a clock the test
    function requests)."""

    store: JobStore
    exporter: InMemorySpanExporter
    make_deps: DepsFactory
    tracing: Tracing

    def deps(self, **kwargs: Any) -> Deps:
        return attrs.evolve(self.make_deps(**kwargs), tracing=self.tracing)


@pytest.fixture
def traced(
    make_deps: DepsFactory,
    store: JobStore,
    tracing: Tracing,
    exporter: InMemorySpanExporter,
) -> TracedRoles:
    return TracedRoles(store=store, exporter=exporter, make_deps=make_deps, tracing=tracing)


async def test_the_claim_span_joins_the_jobs_trace(
    autojump_clock: trio.testing.MockClock, traced: TracedRoles
) -> None:
    store, exporter = traced.store, traced.exporter
    deps = traced.deps()
    job = attrs.evolve(make_job(), trace_parent=CALLER)
    await store.insert(job)
    assert await Scheduler(deps).tick() == 1
    [span] = spans(exporter, "job.claim")
    assert parent_ids(span) == (CALLER_TRACE, CALLER_SPAN)
    assert span.attributes is not None
    assert span.attributes["jobscheduler.job.id"] == job.id


async def test_attempts_and_their_outcomes_join_the_jobs_trace(
    autojump_clock: trio.testing.MockClock, traced: TracedRoles
) -> None:
    store, exporter = traced.store, traced.exporter

    async def flaky_once(ctx: JobContext) -> None:
        await trio.lowlevel.checkpoint()
        if ctx.attempt == 1:
            raise RuntimeError("first try fails")

    deps = traced.deps(registry=registry_with(flaky_once=flaky_once))
    job = attrs.evolve(make_job(job_type="flaky-once", tenant="tenant-t"), trace_parent=CALLER)
    await queue(deps, store, job)
    executor = Executor(deps)
    assert await executor.run(wake_up(job)) == "retried"
    retried = await store.get(job.id)
    await store.claim_due(retried.scheduled_at, 10)
    assert await executor.run(wake_up(job)) == "completed"

    first, second = spans(exporter, "job.attempt")
    for span, number in ((first, 1), (second, 2)):
        assert parent_ids(span) == (CALLER_TRACE, CALLER_SPAN)
        assert span.attributes is not None
        assert span.attributes["jobscheduler.attempt"] == number
        assert span.attributes["jobscheduler.tenant"] == "tenant-t"
        assert span.attributes["jobscheduler.job.type"] == "flaky-once"
    assert first.status.status_code is StatusCode.ERROR
    assert "first try fails" in (first.status.description or "")
    assert second.status.status_code is not StatusCode.ERROR
    outcomes = spans(exporter, "job.outcome")
    assert [(parent_ids(o), (o.attributes or {})["jobscheduler.outcome"]) for o in outcomes] == [
        (context_ids(first), "retried"),
        (context_ids(second), "completed"),
    ]


async def test_jobs_a_handler_enqueues_join_its_attempts_trace(
    autojump_clock: trio.testing.MockClock, traced: TracedRoles
) -> None:
    store, exporter = traced.store, traced.exporter
    children: list[str] = []

    async def parent(ctx: JobContext) -> None:
        child = await ctx.enqueue_async("noop", {})
        children.append(child["id"])

    deps = traced.deps(registry=registry_with(parent=parent))
    job = attrs.evolve(make_job(job_type="parent"), trace_parent=CALLER)
    await queue(deps, store, job)
    assert await Executor(deps).run(wake_up(job)) == "completed"
    [attempt] = spans(exporter, "job.attempt")
    [child_id] = children
    assert ids_of((await store.get(child_id)).trace_parent) == context_ids(attempt)


async def test_untraced_executors_pass_the_parents_trace_on_to_enqueued_jobs(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    children: list[str] = []

    async def parent(ctx: JobContext) -> None:
        children.append((await ctx.enqueue_async("noop", {}))["id"])

    deps = make_deps(registry=registry_with(parent=parent))
    job = attrs.evolve(make_job(job_type="parent"), trace_parent=CALLER)
    await queue(deps, store, job)
    assert await Executor(deps).run(wake_up(job)) == "completed"
    assert (await store.get(children[0])).trace_parent == CALLER


async def test_each_cron_fire_time_starts_a_trace_linked_to_the_templates_creation(
    autojump_clock: trio.testing.MockClock, traced: TracedRoles
) -> None:
    store, exporter = traced.store, traced.exporter
    deps = traced.deps()
    template = attrs.evolve(
        make_job(key="every-5", cron="*/5 * * * *", scheduled_at=BASE), trace_parent=CALLER
    )
    await store.insert(template)
    scheduler = Scheduler(deps)
    await scheduler.tick()
    await trio.sleep(301)
    await scheduler.tick()

    fires = spans(exporter, "cron.fire")
    assert len(fires) == 2
    runs = [j for j in await store.list_jobs("tenant-a", None, 10) if j.template_id]
    assert sorted(ids_of(r.trace_parent) for r in runs) == sorted(context_ids(f) for f in fires)
    for fire in fires:
        assert fire.parent is None  # a trace of its own per fire time ...
        assert fire.context is not None
        assert fire.context.trace_id != CALLER_TRACE
        [link] = fire.links  # ... linked to the template's creation
        assert (link.context.trace_id, link.context.span_id) == (CALLER_TRACE, CALLER_SPAN)
        assert (fire.attributes or {})["jobscheduler.template.id"] == template.id
    assert len({context_ids(f)[0] for f in fires}) == 2


# ----------------------------------------------------------------------- the client


def test_the_client_sends_the_current_span_as_traceparent_on_creates_only(
    tracing: Tracing,
) -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/jobs/batch":
            return httpx.Response(200, json={"results": []})
        return httpx.Response(201 if request.method == "POST" else 200, json={"id": "x"})

    provider = tracing.provider  # type: ignore[attr-defined]
    tracer = provider.get_tracer("test")
    with Client("http://api.test", transport=httpx.MockTransport(answer)) as client:
        client.create("noop", tenant_id="t", idempotency_key="k")  # no current span
        with tracer.start_as_current_span("enqueuing") as span:
            client.create("noop", tenant_id="t", idempotency_key="k2")
            client.create_many([{"jobType": "noop"}])
            client.get("0" * 24)
        context = span.get_span_context()
    sent = [r.headers.get("traceparent") for r in seen]
    flags = int(context.trace_flags)
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"
    assert sent == [None, expected, expected, None]
    assert trace.get_current_span().get_span_context().is_valid is False


@pytest.mark.parametrize(
    ("env", "endpoint"),
    [
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"},
            "http://collector:4318/v1/traces",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:9999/in",
            },
            "http://traces:9999/in",
        ),
    ],
)
def test_the_exporter_sends_where_the_settings_say(env: dict[str, str], endpoint: str) -> None:
    from jobscheduler.observability._otel import exporter_of

    exporter = exporter_of(Settings.from_env(env))
    try:
        assert exporter._endpoint == endpoint  # type: ignore[attr-defined]
    finally:
        exporter.shutdown()
