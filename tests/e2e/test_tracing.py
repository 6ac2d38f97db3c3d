"""One trace followed through a real ``jobscheduler dev``: a request's ``traceparent`` on
``POST /jobs``, then the spans the process exports over OTLP/HTTP to a collector stub on
127.0.0.1 (configured only by the standard ``OTEL_*`` variables): the create, the claim,
the attempt and its outcome, all in the request's trace."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
import trio

from tests.support.dev_server import DevServer
from tests.support.receiver import ExportedSpan, Receiver, exported_spans, receiver

from .conftest import wait_for_job

pytestmark = pytest.mark.e2e

Factory = Callable[..., Awaitable[DevServer]]
Body = Callable[..., dict[str, Any]]

TRACE_ID = "5b8efff798038103d269b633813fc60c"
CALLER_SPAN = "eee19b7ec3c1b174"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"


@pytest.fixture
async def collector() -> AsyncIterator[Receiver]:
    async with receiver() as running:
        yield running


def in_trace(collector: Receiver) -> dict[str, list[ExportedSpan]]:
    by_name: dict[str, list[ExportedSpan]] = {}
    for span in exported_spans(collector):
        if span.trace_id == TRACE_ID:
            by_name.setdefault(span.name.split(" ")[0], []).append(span)
    return by_name


async def test_a_requests_trace_runs_from_the_create_to_the_attempt_and_its_outcome(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body, collector: Receiver
) -> None:
    dev = await dev_factory(
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.base,
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_SERVICE_NAME="jobscheduler-e2e",
    )
    response = await client.post(
        f"{dev.url}/jobs",
        json=job_body(jobType="log-message", payload={"message": "traced"}),
        headers={"traceparent": TRACEPARENT},
    )
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    assert "traceparent" not in response.json()
    await wait_for_job(client, dev, job_id, lambda j: j["status"] == "completed")

    wanted = {"job.create", "job.claim", "job.attempt", "job.outcome"}
    spans: dict[str, list[ExportedSpan]] = {}
    with trio.move_on_after(20):
        while not wanted <= set(spans):
            await trio.sleep(0.1)
            spans = in_trace(collector)
    assert wanted <= set(spans), f"spans of the trace: {spans}\n{dev.tail()}"

    [create] = spans["job.create"]
    [claim] = spans["job.claim"]
    [attempt] = spans["job.attempt"]
    [outcome] = spans["job.outcome"]
    assert create.parent_span_id == CALLER_SPAN
    assert claim.parent_span_id == create.span_id
    assert attempt.parent_span_id == create.span_id
    assert outcome.parent_span_id == attempt.span_id
    for span in (create, claim, attempt, outcome):
        assert span.attributes["jobscheduler.job.id"] == job_id
        assert span.attributes["jobscheduler.tenant"] == "tenant-e2e"
        assert span.attributes["jobscheduler.job.type"] == "log-message"
    assert attempt.attributes["jobscheduler.attempt"] == 1
    assert outcome.attributes["jobscheduler.outcome"] == "completed"
    [export, *_] = collector.to("/v1/traces")
    assert export.headers["content-type"] == "application/x-protobuf"
