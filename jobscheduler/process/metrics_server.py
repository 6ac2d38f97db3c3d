"""The metrics and health listener (``METRICS_PORT``): ``/metrics``, ``/healthz``, ``/readyz``."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from jobscheduler.api.serving.server import serve_asgi
from jobscheduler.observability.health import Health
from jobscheduler.observability.metrics import Metrics

ASGIReceive = Callable[[], Awaitable[dict[str, Any]]]
ASGISend = Callable[[dict[str, Any]], Awaitable[None]]


def metrics_app(
    metrics: Metrics, health: Health | None = None
) -> Callable[[dict[str, Any], ASGIReceive, ASGISend], Any]:
    """A minimal ASGI app: ``/metrics`` (Prometheus text), ``/healthz`` (liveness) and
    ``/readyz`` (readiness), both from ``health`` (see :mod:`jobscheduler.observability.health`).

    ``/healthz`` answers 200 ``ok`` (plain text) while every liveness check passes, else 503
    with the JSON report; ``/readyz`` answers 200 or 503 with the JSON report.
    """
    health = health if health is not None else Health()

    async def app(scope: dict[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/metrics":
            status, ctype, body = 200, CONTENT_TYPE_LATEST, generate_latest(metrics.registry)
        elif path == "/healthz":
            alive, checks = health.liveness()
            if alive:
                status, ctype, body = 200, "text/plain; charset=utf-8", b"ok"
            else:
                status, ctype, body = 503, "application/json", _report(alive, checks)
        elif path == "/readyz":
            ready, checks = await health.readiness()
            status, ctype, body = (
                (200 if ready else 503),
                "application/json",
                _report(ready, checks),
            )
        else:
            status, ctype, body = 404, "application/json", b'{"error":"not found"}'
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", ctype.encode()),
                    (b"content-length", b"%d" % len(body)),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


def _report(ok: bool, checks: dict[str, str]) -> bytes:
    body = {"status": "ok" if ok else "fail", "checks": checks}
    return json.dumps(body, separators=(",", ":")).encode()


async def run_metrics_server(
    metrics: Metrics,
    host: str,
    port: int,
    *,
    health: Health | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve_asgi(
        metrics_app(metrics, health),
        host,
        port,
        names=("METRICS_HOST", "METRICS_PORT"),
        task_status=task_status,
    )
