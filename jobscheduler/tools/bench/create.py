"""The bench's create phase: single ``POST /jobs`` over keep-alive connections against the
framework's own floor, and the cost of authentication, all in one run.

Three servers, started fresh for the phase and measured side by side:

- ``echo``: :mod:`jobscheduler.tools.bench.echo_app`, a trivial quart-trio route on hypercorn that
  parses the JSON body and echoes it (the floor);
- ``dev AUTH=off`` and ``dev AUTH=required`` (an admin key in the Authorization header): a
  ``jobscheduler dev`` each, on its own SQLite file, at the default ``LOG_LEVEL`` (INFO).

The same client (the bench's raw keep-alive HTTP/1.1 pool, ``--create-connections``
connections) sends the same create bodies, each with its own idempotencyKey and due a day
later, so nothing runs. The targets are measured in rounds that alternate the servers, so a
burst of load from elsewhere on a shared machine hits all of them alike; the rate ratio is
the median of the rounds' ratios. Besides wall-clock rates it prints each server's CPU time
per request (from ``/proc/<pid>/stat``, every thread included), which other processes on the
machine disturb far less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import attrs
import trio

from jobscheduler.domain.model import format_time
from jobscheduler.tools.stats import format_seconds, percentiles

#: The target: creates/s at least this share of the echo route's requests/s.
TARGET_RATIO = 0.8
ECHO_MODULE = "jobscheduler.tools.bench.echo_app"
_TICKS = os.sysconf("SC_CLK_TCK")


class Client(Protocol):
    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]: ...

    async def aclose(self) -> None: ...


@attrs.frozen(kw_only=True)
class Server:
    """A process started for the phase: where it answers, its pid, the key it wants."""

    url: str
    pid: int
    key: str | None = None
    stop: Callable[[], Awaitable[object]]


class Host(Protocol):
    """What the phase needs from the bench: start servers and open client pools."""

    async def start_server(self, name: str, *, echo: bool = False, auth: str = "off") -> Server: ...

    def pool(self, url: str, size: int, key: str | None) -> Client: ...


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--create-requests",
        type=int,
        default=2000,
        help="requests per server per round in the create phase (2000)",
    )
    parser.add_argument(
        "--create-rounds", type=int, default=3, help="rounds of the create phase (3)"
    )
    parser.add_argument(
        "--create-connections",
        type=int,
        default=8,
        help="keep-alive connections of the create phase (8)",
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime field 14, stime field 15.
    return (int(fields[11]) + int(fields[12])) / _TICKS


class _Target:
    """One server under test and what its rounds measured."""

    def __init__(self, label: str, server: Server, path: str, pool: Client) -> None:
        self.label = label
        self.server = server
        self.path = path
        self.pool = pool
        self.rates: list[float] = []
        self.cpu: list[float] = []
        self.latencies: list[float] = []
        self.sent = 0

    def bodies(self, tenant: str, n: int) -> list[dict[str, Any]]:
        due = format_time(datetime.now(UTC) + timedelta(days=1))
        start, self.sent = self.sent, self.sent + n
        return [
            {
                "idempotencyKey": f"{tenant}-{i}",
                "tenantId": tenant,
                "jobType": "noop",
                "scheduledAt": due,
                "payload": {"n": i},
            }
            for i in range(start, start + n)
        ]

    async def round(self, bodies: list[dict[str, Any]], connections: int, record: bool) -> None:
        send, receive = trio.open_memory_channel[dict[str, Any]](len(bodies))
        for body in bodies:
            send.send_nowait(body)
        send.close()
        latencies: list[float] = []

        async def worker() -> None:
            async for body in receive:
                started = time.perf_counter()
                status, reply = await self.pool.request("POST", self.path, body)
                latencies.append(time.perf_counter() - started)
                if status != 201:
                    raise RuntimeError(f"{self.label}: POST {self.path} -> {status}: {reply}")

        cpu_before = cpu_seconds(self.server.pid)
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(connections):
                nursery.start_soon(worker)
        took = time.perf_counter() - started
        if record:
            self.rates.append(len(bodies) / took)
            self.cpu.append((cpu_seconds(self.server.pid) - cpu_before) / len(bodies))
            self.latencies.extend(latencies)

    def summary(self) -> str:
        pct = percentiles(self.latencies, (50, 99))
        rates = ", ".join(f"{r:.0f}" for r in self.rates)
        return (
            f"{self.label}: {statistics.median(self.rates):.0f} req/s (rounds: {rates}), "
            f"p50 {format_seconds(pct[50])}, p99 {format_seconds(pct[99])}, "
            f"server CPU {statistics.median(self.cpu) * 1e6:.0f} us/request"
        )


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


async def create_phase(host: Host, args: argparse.Namespace, run_id: str) -> None:
    """Run the phase and print its figures."""
    n, rounds, connections = args.create_requests, args.create_rounds, args.create_connections
    echo = await host.start_server("echo", echo=True)
    off = await host.start_server("create-auth-off", auth="off")
    required = await host.start_server("create-auth-required", auth="required")
    targets = [
        _Target("echo route (the floor)", echo, "/echo", host.pool(echo.url, connections, None)),
        _Target("POST /jobs AUTH=off", off, "/jobs", host.pool(off.url, connections, None)),
        _Target(
            "POST /jobs AUTH=required",
            required,
            "/jobs",
            host.pool(required.url, connections, required.key),
        ),
    ]
    print(
        f"create: {rounds} rounds x {n} requests per server, {connections} keep-alive "
        f"connections, jobs due in a day (nothing runs); {_load()}"
    )
    try:
        tenant = f"bench-create-{run_id}"
        for target in targets:  # warm-up: connections, caches, first-use costs
            await target.round(target.bodies(tenant, min(n, 300)), connections, record=False)
        for _ in range(rounds):
            for target in targets:
                await target.round(target.bodies(tenant, n), connections, record=True)
    finally:
        for target in targets:
            await target.pool.aclose()
            await target.server.stop()
    for target in targets:
        print("  " + target.summary())
    floor, create, authed = targets
    ratios = [c / e for c, e in zip(create.rates, floor.rates, strict=True)]
    ratio = statistics.median(ratios)
    verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
    cpu_ratio = statistics.median(floor.cpu) / statistics.median(create.cpu)
    print(
        f"  create rate / echo rate: {ratio:.0%} (median of rounds "
        f"{', '.join(f'{r:.0%}' for r in ratios)}; target >= {TARGET_RATIO:.0%}: {verdict}); "
        f"echo CPU / create CPU per request: {cpu_ratio:.0%}"
    )
    p_off = percentiles(create.latencies, (50, 99))
    p_req = percentiles(authed.latencies, (50, 99))
    print(
        f"  cost of auth (POST /jobs, AUTH=required - AUTH=off): "
        f"p50 {format_seconds(p_off[50])} -> {format_seconds(p_req[50])}, "
        f"p99 {format_seconds(p_off[99])} -> {format_seconds(p_req[99])}, server CPU "
        f"{(statistics.median(authed.cpu) - statistics.median(create.cpu)) * 1e6:+.0f} us/request"
    )
    print(f"  after the phase: {_load()}")
