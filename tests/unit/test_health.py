"""Liveness and readiness on every role's metrics listener: ``/healthz`` fails when a
registered liveness check reports a problem, ``/readyz`` names each dependency check and
answers within its deadline even when a dependency hangs."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

from jobscheduler.observability.health import Health
from jobscheduler.observability.metrics import Metrics
from jobscheduler.process.metrics_server import metrics_app


async def get(app: Any, path: str) -> tuple[int, str, bytes]:
    """One GET through the raw ASGI app: (status, content type, body)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "http", "path": path, "method": "GET"}, receive, send)
    start, body = sent
    headers = dict(start["headers"])
    return start["status"], headers[b"content-type"].decode(), body["body"]


async def ready() -> None:
    await trio.lowlevel.checkpoint()


async def refused() -> None:
    await trio.lowlevel.checkpoint()
    raise ConnectionRefusedError("connection refused: 127.0.0.1:9092")


async def hangs() -> None:
    await trio.sleep_forever()


async def test_healthz_is_ok_while_every_liveness_check_passes() -> None:
    health = Health()
    health.add_liveness("executor", lambda: None)
    assert await get(metrics_app(Metrics(), health), "/healthz") == (
        200,
        "text/plain; charset=utf-8",
        b"ok",
    )


async def test_healthz_is_503_naming_the_problem_when_a_liveness_check_fails() -> None:
    health = Health()
    health.add_liveness("executor", lambda: "no consumer-group membership for 75s")
    health.add_liveness("other", lambda: None)
    status, ctype, body = await get(metrics_app(Metrics(), health), "/healthz")
    assert (status, ctype) == (503, "application/json")
    assert json.loads(body) == {
        "status": "fail",
        "checks": {"executor": "no consumer-group membership for 75s", "other": "ok"},
    }


async def test_liveness_check_that_raises_counts_as_a_problem() -> None:
    def broken() -> str | None:
        raise RuntimeError("bug")

    health = Health()
    health.add_liveness("executor", broken)
    alive, checks = health.liveness()
    assert not alive
    assert checks == {"executor": "check failed: RuntimeError"}


async def test_readyz_is_200_with_every_check_named_when_all_answer() -> None:
    health = Health()
    health.add_readiness("store", ready)
    health.add_readiness("kafka", ready)
    status, ctype, body = await get(metrics_app(Metrics(), health), "/readyz")
    assert (status, ctype) == (200, "application/json")
    assert json.loads(body) == {"status": "ok", "checks": {"store": "ok", "kafka": "ok"}}


async def test_readyz_is_503_and_names_the_failing_and_the_hung_dependency_within_its_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    health = Health(timeout=1.5)
    health.add_readiness("store", ready)
    health.add_readiness("kafka", refused)
    health.add_readiness("etcd", hangs)
    started = trio.current_time()
    status, _, body = await get(metrics_app(Metrics(), health), "/readyz")
    assert trio.current_time() - started == pytest.approx(1.5)
    assert status == 503
    assert json.loads(body) == {
        "status": "fail",
        "checks": {
            "store": "ok",
            "kafka": "connection refused: 127.0.0.1:9092",
            "etcd": "timed out after 1.5s",
        },
    }


async def test_a_process_without_checks_is_live_and_ready() -> None:
    app = metrics_app(Metrics())
    assert (await get(app, "/healthz"))[0] == 200
    assert await get(app, "/readyz") == (200, "application/json", b'{"status":"ok","checks":{}}')


async def test_a_later_registration_replaces_and_remove_forgets_a_check() -> None:
    health = Health()
    health.add_liveness("executor", lambda: "stuck")
    health.add_liveness("executor", lambda: None)
    assert health.liveness() == (True, {"executor": "ok"})
    health.add_readiness("store", refused)
    health.remove("store")
    assert await health.readiness() == (True, {})
