"""Prometheus metrics, the :9100 metrics/health listener, and structured logging."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from jobscheduler import http_errors
from jobscheduler.health import Health
from jobscheduler.unread_body import CloseUnreadBodies

if TYPE_CHECKING:
    from hypercorn.typing import ASGIFramework

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_HANDLER_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900)


class Metrics:
    """Every metric the roles export, on one registry owned by the process (not global)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.scheduler_tick_duration = Histogram(
            "scheduler_tick_duration_seconds",
            "Time spent in one scheduler tick (claiming, publishing, spawning).",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.scheduler_jobs_claimed = Counter(
            "scheduler_jobs_claimed_total", "Jobs moved from pending to queued.", registry=r
        )
        self.scheduler_dispatch_errors = Counter(
            "scheduler_dispatch_errors_total",
            "Claimed jobs whose wake-up could not be published (the reaper re-pends them).",
            registry=r,
        )
        self.scheduler_cron_spawned = Counter(
            "scheduler_cron_instances_spawned_total",
            "One-off instances inserted by cron templates.",
            registry=r,
        )
        self.scheduler_cron_lag = Histogram(
            "scheduler_cron_lag_seconds",
            "Spawn time minus fire time of each cron run spawned.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600),
            registry=r,
        )
        self.scheduler_cron_skipped = Counter(
            "scheduler_cron_skipped_total",
            "Cron fire times recorded in the ledger without a run, by reason.",
            ["reason"],
            registry=r,
        )
        self.scheduler_cron_cancelled_previous = Counter(
            "scheduler_cron_cancelled_previous_total",
            "Unfinished cron runs cancelled (or asked to stop) by a newer fire time of their "
            "template under overlap=cancel_previous.",
            registry=r,
        )
        self.scheduler_invalid_cron = Counter(
            "scheduler_invalid_cron_templates_total",
            "Cron templates dead-lettered because their expression no longer parses.",
            registry=r,
        )
        self.scheduler_is_leader = Gauge(
            "scheduler_is_leader", "1 while this scheduler instance holds leadership.", registry=r
        )
        self.executor_processed = Counter(
            "executor_jobs_processed_total",
            "Bus messages handled, by job type and result "
            "(completed, retried, dlq, stale, released).",
            ["job_type", "result"],
            registry=r,
        )
        self.executor_handler_duration = Histogram(
            "executor_handler_duration_seconds",
            "Handler run time.",
            ["job_type"],
            buckets=_HANDLER_BUCKETS,
            registry=r,
        )
        self.reaper_recovered = Counter(
            "reaper_recovered_jobs_total",
            "Stuck jobs returned to pending (or dead-lettered), by sweep (queued, claimed).",
            ["sweep"],
            registry=r,
        )
        self.transitions_lost = Counter(
            "jobs_transitions_lost_total",
            "Conditional updates that matched nothing (a race lost, or a stale claim token).",
            ["transition"],
            registry=r,
        )
        self.api_requests = Counter(
            "api_requests_total",
            "HTTP requests served by the API.",
            ["method", "route", "status"],
            registry=r,
        )
        self.api_request_duration = Histogram(
            "api_request_duration_seconds",
            "HTTP request latency.",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        # Tenancy (jobscheduler.tenancy).
        self.api_quota_rejections = Counter(
            "api_quota_rejections_total",
            "Requests refused by a tenant quota (429), by reason (rate, unfinished).",
            ["reason"],
            registry=r,
        )
        self.api_auth_failures = Counter(
            "api_auth_failures_total",
            "Requests refused with 401 (no, malformed, unknown or revoked API key).",
            registry=r,
        )
        self.api_audit_failures = Counter(
            "api_audit_write_failures_total",
            "Audit records that could not be written (the request itself was served).",
            registry=r,
        )
        for reason in ("rate", "unfinished"):
            self.api_quota_rejections.labels(reason=reason)
        self.jobs = Gauge(
            "jobs",
            "Jobs by status and job type (every tenant), sampled by the reaper.",
            ["status", "job_type"],
            registry=r,
        )
        self.queue_lag = Gauge(
            "jobs_queue_lag_seconds",
            "How long the oldest due pending one-off job has waited past its scheduledAt, "
            "sampled by the reaper.",
            registry=r,
        )
        for sweep in ("queued", "claimed"):
            self.reaper_recovered.labels(sweep=sweep)


ASGIReceive = Callable[[], Awaitable[dict[str, Any]]]
ASGISend = Callable[[dict[str, Any]], Awaitable[None]]


def metrics_app(
    metrics: Metrics, health: Health | None = None
) -> Callable[[dict[str, Any], ASGIReceive, ASGISend], Any]:
    """A minimal ASGI app: ``/metrics`` (Prometheus text), ``/healthz`` (liveness) and
    ``/readyz`` (readiness), both from ``health`` (see :mod:`jobscheduler.health`).

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


def hypercorn_config(host: str, port: int) -> HypercornConfig:
    config = HypercornConfig()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 5.0
    config.keep_alive_timeout = 75.0
    return config


async def serve_asgi(
    app: Any,
    host: str,
    port: int,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve an ASGI app with hypercorn's trio worker inside the caller's nursery.

    ``task_status.started`` receives the bound addresses (port 0 picks a free port).
    Errors hypercorn answers itself (400, 431) carry the JSON error body too, and a reply
    sent before its request's body was read closes the connection (see unread_body.py).
    """
    http_errors.install()
    # hypercorn types the app as a union of its ASGI/WSGI callables; ours is plain ASGI.
    asgi = cast("ASGIFramework", CloseUnreadBodies(app))
    await serve(asgi, hypercorn_config(host, port), task_status=task_status)


async def run_metrics_server(
    metrics: Metrics,
    host: str,
    port: int,
    *,
    health: Health | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve_asgi(metrics_app(metrics, health), host, port, task_status=task_status)


# --------------------------------------------------------------------------- logging

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class _Formatter(logging.Formatter):
    """One line per event: the message plus every ``extra={...}`` field, text or JSON."""

    def __init__(self, fmt: str, role: str) -> None:
        super().__init__()
        self._json = fmt == "json"
        self._role = role

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "role": getattr(record, "role", self._role),
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key != "role" and value is not None:
                fields[key] = value
        if record.exc_info:
            fields["exc"] = self.formatException(record.exc_info)
        if self._json:
            return json.dumps(fields, default=str)
        head = f"{fields.pop('ts')} {fields.pop('level'):<7} {fields.pop('msg')}"
        rest = " ".join(f"{k}={_logfmt(v)}" for k, v in fields.items())
        return f"{head} {rest}"


def _logfmt(value: Any) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        return json.dumps(text)
    return text


def configure_logging(level: str, fmt: str, role: str) -> None:
    """Route every log record to stderr as one structured line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(fmt, role))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("hypercorn.error", "hypercorn.access", "quart.serving"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
