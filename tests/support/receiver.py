"""A recording HTTP receiver on 127.0.0.1 for end-to-end tests: an OTLP/HTTP collector stub
(spans a ``dev`` exports) and a webhook receiver (deliveries a ``dev`` sends).

Every request is recorded (method, path, headers, body). :attr:`Receiver.statuses` lists
the statuses to answer in turn (then 200 for good), so a test can fail the first deliveries.
:func:`exported_spans` decodes the OTLP trace requests into flat span records.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import trio
from hypercorn.trio import serve

from jobscheduler.api.serving.server import hypercorn_config
from tests.support.asgi_app import Receive, Scope, Send, answer_lifespan, read_request


@attrs.frozen
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@attrs.define
class Receiver:
    port: int = 0
    requests: list[Received] = attrs.field(factory=list)
    #: Statuses to answer, first to last; 200 once they run out.
    statuses: list[int] = attrs.field(factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def to(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        headers, body = await read_request(scope, receive)
        self.requests.append(Received(scope["method"], scope["path"], headers, body))
        status = self.statuses.pop(0) if self.statuses else 200
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-length", b"0")],
            }
        )
        await send({"type": "http.response.body", "body": b""})


@asynccontextmanager
async def receiver() -> AsyncIterator[Receiver]:
    """Serve a :class:`Receiver` on 127.0.0.1 (a free port) for the block's duration."""
    server = Receiver()
    async with trio.open_nursery() as nursery:
        bound: list[str] = await nursery.start(
            partial(serve, server.app, hypercorn_config("127.0.0.1", 0))
        )
        server.port = int(bound[0].rsplit(":", 1)[1])
        yield server
        nursery.cancel_scope.cancel()


@attrs.frozen
class ExportedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    links: list[tuple[str, str]]


def exported_spans(server: Receiver) -> list[ExportedSpan]:
    """Every span the OTLP/HTTP (protobuf) requests to ``/v1/traces`` carried."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    spans: list[ExportedSpan] = []
    for request in server.to("/v1/traces"):
        export = ExportTraceServiceRequest()
        export.ParseFromString(request.body)
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attributes = {
                        a.key: getattr(a.value, a.value.WhichOneof("value"))
                        for a in span.attributes
                    }
                    spans.append(
                        ExportedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes=attributes,
                            links=[
                                (link.trace_id.hex(), link.span_id.hex()) for link in span.links
                            ],
                        )
                    )
    return spans
