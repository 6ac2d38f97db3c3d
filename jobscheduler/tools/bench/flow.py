"""The bench's flow-control phases (``--phases fairness,keyed,rated``). Each prints its
figures, never asserts them: machines are shared and noisy.

- ``fairness``: tenant A's backlog of ``--fair-backlog`` due ``noop`` jobs, then tenant B's 20
  jobs due 0.5 s after A's; B's start delays (claimedAt - scheduledAt) and A's drain rate,
  on a fresh ``dev`` with FLOW_CONTROL on, then off (the drain ratio on/off); with
  ``--fair-runs N``, N such pairs in alternating order, and the median ratio.
- ``keyed``: 1,000 ``noop`` jobs over 50 concurrency keys in a tenant whose ``noop`` has
  ``concurrency=1`` (an admin override), then the same in a tenant without a limit: the
  throughput ratio, and whether two jobs of one key ever overlapped (from the attempt
  records' start and finish times); with ``--keyed-runs N``, N such pairs in alternating
  order, and the median ratio; with ``--keyed-sleep-ms N`` (embedded), jobs of the
  built-in ``slow`` that sleep N ms instead, so the limit's cost shows beside work.
- ``rated``: 2,000 ``noop`` jobs in a tenant whose ``noop`` has ``rateLimit=50/s``: starts
  per 1 s window (by claimedAt); on the distributed stack the leader is SIGKILLed midway,
  and the windows without a leader are reported apart.

The limits are per-tenant admin overrides (``PUT /flow/limits/noop``), so every stack's
``noop`` executors run the phases unchanged.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import trio

from jobscheduler._argtypes import positive_int
from jobscheduler.domain.model import parse_time

from . import enqueue as bench_enqueue
from .enqueue import noop_bodies, whole_second_after
from .http import Pool
from .phases import _jobs, _load, _summary
from .stack import STARTUP_TIMEOUT, Stack
from .wait import until_completed

#: B's jobs, and how long after A's due instant they are due.
LATE_JOBS = 20
LATE_BY = 0.5


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fair-backlog", type=int, default=100_000, help="tenant A's due jobs (100000)"
    )
    parser.add_argument(
        "--fair-runs",
        type=positive_int,
        default=1,
        help="pairs of fairness runs, on and off in alternating order (1); prints each "
        "pair's drain ratio and their median",
    )
    parser.add_argument(
        "--keyed-runs",
        type=positive_int,
        default=1,
        help="pairs of keyed drains, limited and unlimited in alternating order (1); prints "
        "each pair's ratio and their median",
    )
    parser.add_argument(
        "--keyed-sleep-ms",
        type=positive_int,
        default=None,
        help="the keyed jobs are the built-in slow, sleeping this long (default: noop)",
    )


async def _completed(server: Any, target: float) -> float:
    """Wait until the server's executor completed ``target`` jobs; returns when."""
    with trio.fail_after(900):
        await until_completed(server.completed, target)
    return time.time()


def _since_due(job: dict[str, Any], instant: str) -> float:
    return (parse_time(instant, "t") - parse_time(job["scheduledAt"], "s")).total_seconds()


@attrs.frozen
class _FairRun:
    """One fairness run's figures."""

    #: A's and B's jobs per second, from A's due instant to the last one's end.
    rate: float
    #: The CPU time ``dev`` spent over that drain (every thread), per 1,000 jobs.
    cpu_ms: float
    #: B's claim and start delays (claimedAt, and the first attempt's startedAt, after
    #: scheduledAt), in seconds.
    claims: list[float]
    starts: list[float]

    @property
    def cores(self) -> float:
        """How many cores ``dev`` kept busy over the drain (its CPU time over the drain's)."""
        return self.cpu_ms * self.rate / 1e6


async def _fair_run(stack: Stack, args: argparse.Namespace, flow: bool, pair: int) -> _FairRun:
    """One fairness run on a fresh ``dev`` (a store of its own)."""
    name = f"fair-{'on' if flow else 'off'}-{pair}"
    server = await stack.start_flow_server(name, flow=flow)
    try:
        client = stack.pool(server.url, args.concurrency, None)
        n = args.fair_backlog
        tag = f"{stack.run_id}-{int(flow)}-{pair}"
        probe = noop_bodies(f"probe-{tag}", 2000, datetime.now(UTC) + timedelta(days=1))
        started = time.perf_counter()
        await bench_enqueue.send_batches(client, probe, args.batch_size)
        rate = len(probe) / (time.perf_counter() - started)
        due = whole_second_after(n / rate * 2.5 + 5)
        a, b = f"fair-a-{tag}", f"fair-b-{tag}"
        await bench_enqueue.send_batches(client, noop_bodies(a, n, due), args.batch_size)
        late = due + timedelta(seconds=LATE_BY)
        await bench_enqueue.send_batches(client, noop_bodies(b, LATE_JOBS, late), args.batch_size)
        if datetime.now(UTC) >= due:
            raise RuntimeError("submission overran the due instant; use a smaller --fair-backlog")
        baseline = await server.completed()
        await trio.sleep(max((due - datetime.now(UTC)).total_seconds(), 0.0))
        cpu = server.process.cpu_seconds()
        done = await _completed(server, baseline + n + LATE_JOBS)
        cpu = server.process.cpu_seconds() - cpu
        drain = done - due.timestamp()
        late_jobs = await _jobs(client, b)
        claims = [_since_due(j, j["claimedAt"]) for j in late_jobs]
        starts = []
        for job in late_jobs:
            _, answer = await client.request("GET", f"/jobs/{job['id']}/attempts")
            starts.append(_since_due(job, answer["attempts"][0]["startedAt"]))
        await client.aclose()
        total = n + LATE_JOBS
        return _FairRun(total / drain, cpu * 1e6 / total, claims, starts)
    finally:
        await server.stop()


async def fairness(stack: Stack, args: argparse.Namespace) -> None:
    """Tenant B's start delay behind tenant A's backlog, with FLOW_CONTROL on and off:
    ``--fair-runs`` pairs, every second one with flow control off first (so neither setting
    always runs on a machine that has just run the other)."""
    ratios, costs = [], []
    for pair in range(args.fair_runs):
        runs = {}
        for flow in _order(pair):
            run = runs[flow] = await _fair_run(stack, args, flow, pair)
            label = "on" if flow else "off"
            print(
                f"fairness, FLOW_CONTROL {label}: A's {args.fair_backlog} jobs + B's "
                f"{LATE_JOBS} drained at {run.rate:.0f} jobs/s, CPU {run.cpu_ms:.0f} ms "
                f"per 1,000 jobs ({run.cores:.2f} cores; {_load()})"
            )
            print("  " + _summary("B's claim delay (claimedAt - scheduledAt)", run.claims))
            print(
                "  "
                + _summary(
                    "B's start delay (startedAt - scheduledAt), p99 target 100ms", run.starts
                )
            )
        ratios.append(runs[True].rate / runs[False].rate)
        costs.append(runs[True].cpu_ms / runs[False].cpu_ms)
        print(
            f"fairness: drain with flow control / without = {ratios[-1]:.2f} (target >= 0.9); "
            f"CPU per job {costs[-1]:.2f}x"
        )
    if len(ratios) > 1:
        print(f"fairness: median drain ratio {_spread(ratios)}")
        print(f"fairness: median CPU per job with / without {_spread(costs, 'x')}")


def _order(pair: int) -> tuple[bool, bool]:
    """The order of a pair's two runs (the flagged one first, then the other): swapped
    every second pair, so neither always runs right after the other."""
    return (True, False) if pair % 2 == 0 else (False, True)


def _spread(values: list[float], unit: str = "") -> str:
    """``values``' median, then each of them in order: "0.91x (0.85, 0.91, 0.96)"."""
    each = ", ".join(f"{v:.2f}" for v in sorted(values))
    return f"{statistics.median(values):.2f}{unit} ({each})"


def _successions(records: list[tuple[str, float, float]]) -> tuple[int, list[float]]:
    """How many attempts started before the previous attempt of their key finished, and
    for the others, how long after it they started (seconds)."""
    by_key: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for key, start, end in records:
        by_key[key].append((start, end))
    overlaps, gaps = 0, []
    for spans in by_key.values():
        busy_until = -math.inf
        for start, end in sorted(spans):
            if start < busy_until:
                overlaps += 1
            elif busy_until > -math.inf:
                gaps.append(start - busy_until)
            busy_until = max(busy_until, end)
    return overlaps, gaps


#: The keyed phase's jobs, and the concurrency keys they are spread over (one limit each).
KEYED_JOBS = 1000
KEYED_KEYS = 50


async def _keyed_run(
    stack: Stack, client: Pool, args: argparse.Namespace, limited: bool, pair: int
) -> float:
    """One keyed drain in a tenant of its own; returns its rate (jobs/s). A limited one
    also prints whether two attempts of a key ever overlapped (from the attempt records)."""
    n = KEYED_JOBS
    tenant = f"keyed-{'limit' if limited else 'free'}-{stack.run_id}-{pair}"
    sleep_ms = args.keyed_sleep_ms
    job_type = "noop" if sleep_ms is None else "slow"
    sleeping: dict[str, Any] = (
        {} if sleep_ms is None else {"jobType": job_type, "payload": {"sleepMs": sleep_ms}}
    )
    if limited:
        status, body = await client.request(
            "PUT", f"/flow/limits/{job_type}?tenantId={tenant}", {"concurrency": 1}
        )
        if status != 200:
            raise RuntimeError(f"PUT /flow/limits -> {status}: {body}")
        await trio.sleep(1.5)  # the leader reads overrides every second
    due = datetime.now(UTC) + timedelta(seconds=2)

    def key(i: int) -> str:
        return f"key-{i % KEYED_KEYS}"

    await bench_enqueue.send_batches(
        client, noop_bodies(tenant, n, due, concurrencyKey=key, **sleeping), args.batch_size
    )
    baseline = await stack.completed_total()
    await trio.sleep(max((due - datetime.now(UTC)).total_seconds(), 0.0))
    with trio.fail_after(600):
        await until_completed(stack.completed_total, baseline + n)
    jobs = await _jobs(client, tenant)
    rate = n / (max(parse_time(j["updatedAt"], "u") for j in jobs) - due).total_seconds()
    if not limited:
        print(f"keyed: without a limit {rate:.0f} jobs/s")
        return rate
    records: list[tuple[str, float, float]] = []
    for job in jobs:
        _, answer = await client.request("GET", f"/jobs/{job['id']}/attempts")
        for attempt in answer["attempts"]:
            start = parse_time(attempt["startedAt"], "s").timestamp()
            end = parse_time(attempt["finishedAt"], "f").timestamp()
            records.append((job["concurrencyKey"], start, end))
    overlaps, gaps = _successions(records)
    print(
        f"keyed: {n} {_kind(sleep_ms)} over {KEYED_KEYS} keys, concurrency 1 per key: "
        f"{rate:.0f} jobs/s; "
        f"attempts overlapping another of their key: {overlaps} (of {len(records)}; target 0)"
    )
    if gaps:
        print(
            f"keyed: a key's next attempt started {statistics.median(gaps) * 1000:.1f} ms "
            "after the one before it finished (median)"
        )
    return rate


def _kind(sleep_ms: int | None) -> str:
    """What the keyed jobs are, as the bench prints it."""
    return "jobs" if sleep_ms is None else f"slow jobs of {sleep_ms} ms"


async def keyed(stack: Stack, client: Pool, args: argparse.Namespace) -> None:
    """1,000 jobs over 50 keys with concurrency=1 per key, against no limit:
    ``--keyed-runs`` pairs, every second one with the unlimited drain first (so neither
    always runs in a process that has just run the other)."""
    ratios = []
    for pair in range(args.keyed_runs):
        rates = {
            limited: await _keyed_run(stack, client, args, limited, pair)
            for limited in _order(pair)
        }
        ratios.append(rates[True] / rates[False])
        print(f"keyed: with / without = {ratios[-1]:.2f} (target >= 0.8; {_load()})")
    if len(ratios) > 1:
        print(f"keyed: median ratio {_spread(ratios)}")


async def rated(stack: Stack, client: Pool, args: argparse.Namespace) -> None:
    """2,000 jobs at a rate limit of 50/s; distributed: the leader SIGKILLed midway."""
    n, per_second = 2000, 50
    tenant = f"rated-{stack.run_id}"
    status, body = await client.request(
        "PUT", f"/flow/limits/noop?tenantId={tenant}", {"rateLimit": f"{per_second}/s"}
    )
    if status != 200:
        raise RuntimeError(f"PUT /flow/limits -> {status}: {body}")
    await trio.sleep(1.5)
    due = datetime.now(UTC) + timedelta(seconds=2)
    await bench_enqueue.send_batches(client, noop_bodies(tenant, n, due), args.batch_size)
    baseline = await stack.completed_total()
    killed_at = None
    if stack.distributed:
        await trio.sleep(max((due - datetime.now(UTC)).total_seconds(), 0.0) + 15)
        with trio.fail_after(STARTUP_TIMEOUT):
            leader = await stack.leader()
        leader.kill()
        killed_at = time.time()
        standby = await stack.add_scheduler()  # two candidates again
        with trio.fail_after(stack.settings.election_ttl + STARTUP_TIMEOUT):
            await stack.leader([p for p in stack.schedulers if p.running()])
        print(f"rated: SIGKILLed {leader.name}; {standby.name} started as the new standby")
    with trio.fail_after(n / per_second * 3 + 120):
        await until_completed(stack.completed_total, baseline + n)
    starts = sorted(
        parse_time(j["claimedAt"], "c").timestamp() for j in await _jobs(client, tenant)
    )
    first = starts[0]
    windows = [0] * (math.floor(starts[-1] - first) + 1)
    for start in starts:
        windows[math.floor(start - first)] += 1
    full = windows[1:-1]  # after the first, and not the last (partial) window
    quiet = [i for i, count in enumerate(full, 1) if count == 0]
    busy = [c for c in full if c]
    print(
        f"rated: {n} jobs at {per_second}/s: starts per 1 s window after the first: "
        f"min {min(busy)}, max {max(busy)} over {len(busy)} windows (target 45..55; {_load()})"
    )
    print(f"  windows: {windows}")
    if killed_at is not None:
        print(
            f"  leaderless windows (no starts) after the SIGKILL at +{killed_at - first:.1f}s: "
            f"{quiet}"
        )
