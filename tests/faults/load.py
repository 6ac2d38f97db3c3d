"""A steady load of job creates over HTTP, every request and its answer recorded."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import attrs
import httpx
import trio

#: What a client waits for an answer (the API must answer, 503 included, well within it).
CLIENT_TIMEOUT = 5.0
#: Creates in flight at once in a burst.
BURST_CONCURRENCY = 10


@attrs.define(kw_only=True)
class Sent:
    """One ``POST /jobs`` and its outcome."""

    key: str
    job_type: str
    at: datetime
    latency: float | None = None
    status: int | None = None
    error: str | None = None
    job_id: str | None = None

    @property
    def answered(self) -> bool:
        return self.status is not None


class LoadGenerator:
    """Creates jobs at ``rate`` per second: ``noop`` jobs, and a ``slow_share`` of ``slow``
    ones (1-2 s), due at once. Requests are concurrent, so a hanging API does not slow the
    rate down; each waits at most :data:`CLIENT_TIMEOUT`."""

    def __init__(
        self,
        api_url: str,
        tenant: str,
        key_prefix: str,
        *,
        rate: float = 20.0,
        slow_share: float = 0.25,
        max_attempts: int = 10,
        api_key: str | None = None,
    ) -> None:
        self.api_url = api_url
        #: Sent as ``Authorization: Bearer`` (the API role requires keys).
        self.api_key = api_key
        self.tenant = tenant
        self.key_prefix = key_prefix
        self.rate = rate
        self.slow_share = slow_share
        self.max_attempts = max_attempts
        self.sent: list[Sent] = []
        self._stop = trio.Event()
        self._counter = 0
        self._random = random.Random(key_prefix)
        self._http: httpx.AsyncClient | None = None
        self._nursery: trio.Nursery | None = None

    def _body(self, job_type: str) -> tuple[str, dict[str, Any]]:
        self._counter += 1
        key = f"{self.key_prefix}-{self._counter}"
        body: dict[str, Any] = {
            "idempotencyKey": key,
            "tenantId": self.tenant,
            "jobType": job_type,
            "scheduledAt": "2020-01-01T00:00:00Z",
            "maxAttempts": self.max_attempts,
        }
        if job_type == "slow":
            body["payload"] = {"sleepMs": self._random.randint(1000, 2000)}
        return key, body

    async def _send(self, job_type: str, into: list[Sent] | None = None) -> None:
        assert self._http is not None
        key, body = self._body(job_type)
        sent = Sent(key=key, job_type=job_type, at=datetime.now(UTC))
        self.sent.append(sent)
        if into is not None:
            into.append(sent)
        started = trio.current_time()
        try:
            response = await self._http.post(f"{self.api_url}/jobs", json=body)
        except httpx.TimeoutException:
            sent.error = "timeout"
            return
        except httpx.TransportError as exc:
            sent.error = f"{type(exc).__name__}: {exc}"
            return
        sent.latency = trio.current_time() - started
        sent.status = response.status_code
        if response.status_code == 201:
            sent.job_id = response.json()["id"]
        else:
            sent.error = response.text[:200]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send until :meth:`stop`, then wait for the answers still due (bounded by the
        client timeout)."""
        limits = httpx.Limits(max_connections=500, max_keepalive_connections=50)
        async with (
            httpx.AsyncClient(
                timeout=CLIENT_TIMEOUT,
                limits=limits,
                headers={"Authorization": f"Bearer {self.api_key}"} if self.api_key else None,
            ) as http,
            trio.open_nursery() as nursery,
        ):
            self._http, self._nursery = http, nursery
            task_status.started()
            next_at = trio.current_time()
            while not self._stop.is_set():
                job_type = "slow" if self._random.random() < self.slow_share else "noop"
                nursery.start_soon(self._send, job_type)
                next_at += 1 / self.rate
                with trio.move_on_at(next_at):
                    await self._stop.wait()

    def stop(self) -> None:
        self._stop.set()

    async def burst(self, count: int, job_type: str = "noop") -> list[Sent]:
        """Create ``count`` jobs at once (a backlog); returns them once all are answered."""
        limiter = trio.CapacityLimiter(BURST_CONCURRENCY)
        sent: list[Sent] = []

        async def send() -> None:
            async with limiter:
                await self._send(job_type, sent)

        async with trio.open_nursery() as nursery:
            for _ in range(count):
                nursery.start_soon(send)
        return sent

    # -- figures ---------------------------------------------------------------------------

    @property
    def accepted(self) -> list[Sent]:
        return [s for s in self.sent if s.status == 201]

    def answered_between(self, start: datetime, end: datetime) -> list[Sent]:
        return [s for s in self.sent if start <= s.at <= end]
