"""The bench's load phases on the stack under test: burst drain, steady load, timer
precision and, distributed only, scheduler failover.

Each phase is a function of the :class:`~jobscheduler.tools.bench.stack.Stack`, the client
pool and the command line; it prints its figures (never asserting them: machines are shared
and noisy). Completions are counted on the executor's metrics; delays come from the jobs'
own timestamps.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import trio

from jobscheduler.domain.model import format_time, parse_time
from jobscheduler.tools.stats import format_seconds, percentiles

from . import enqueue as bench_enqueue
from .http import Pool
from .stack import STARTUP_TIMEOUT, Stack
from .wait import until_completed

PCTS = (50, 95, 99)
#: The timer-precision workload: jobs, and creations per second.
TIMER_JOBS = 200
TIMER_RATE = 20.0


def _load() -> str:
    """The 1-minute load average, printed beside timings (the machine may be shared)."""
    return f"load average {os.getloadavg()[0]:.1f}"


def _summary(label: str, seconds: list[float]) -> str:
    if not seconds:
        return f"{label}: no samples"
    pct = percentiles(seconds, (*PCTS, 100))
    parts = ", ".join(f"p{p} {format_seconds(pct[p])}" for p in PCTS)
    return f"{label}: {parts}, max {format_seconds(pct[100])} (n={len(seconds)})"


async def _post(client: Pool, body: dict[str, Any], latencies: list[float]) -> str:
    """One create (retried on a 503, :func:`~.enqueue.post_job`), its latency recorded."""
    started = time.perf_counter()
    job_id = await bench_enqueue.post_job(client, body)
    latencies.append(time.perf_counter() - started)
    return job_id


async def _jobs(client: Pool, tenant: str, status: str | None = None) -> list[dict[str, Any]]:
    query = f"/jobs?tenantId={tenant}&limit=5000" + (f"&status={status}" if status else "")
    code, jobs = await client.request("GET", query)
    if code != 200:
        raise RuntimeError(f"GET {query} -> {code}: {jobs}")
    return list(jobs)


async def _wait_completed(stack: Stack, target: float) -> None:
    with trio.fail_after(300):
        await until_completed(stack.completed_total, target)


async def burst(stack: Stack, client: Pool, args: argparse.Namespace) -> None:
    """N jobs all due at one instant: the drain rate, the stack's CPU per job and the pick
    delays (distributed: also the store commands and CPU per role)."""
    n = args.burst
    tenant = f"bench-burst-{stack.run_id}"
    # Estimate the submission rate on a small sample, then pick a due instant safely after
    # the whole burst will have been accepted.
    probe_started = time.perf_counter()
    probe = [
        {
            "idempotencyKey": f"{tenant}-probe-{i}",
            "tenantId": f"{tenant}-probe",
            "jobType": "noop",
            "scheduledAt": format_time(datetime.now(UTC) + timedelta(days=1)),
        }
        for i in range(200)
    ]
    await bench_enqueue.send_singly(client, probe, args.concurrency)
    rate = len(probe) / (time.perf_counter() - probe_started)
    print(f"probe: {rate:.0f} req/s")
    due = bench_enqueue.whole_second_after(n / rate * 2.5 + 3)
    bodies = bench_enqueue.noop_bodies(tenant, n, due)
    baseline = await stack.completed_total()
    started = time.perf_counter()
    await bench_enqueue.send_singly(client, bodies, args.concurrency)
    submitted = time.perf_counter() - started
    if datetime.now(UTC) >= due:
        raise RuntimeError("submission overran the due instant; rerun with a smaller --burst")
    print(
        f"burst: {n} jobs accepted in {submitted:.2f}s ({n / submitted:.0f} req/s, "
        f"{args.concurrency} connections); all due at {format_time(due)}"
    )
    # The stack's processes (a phase's own servers, e.g. the create phase's, are gone).
    live = [p for p in stack.processes if p.running()]
    roles = [(p.name, p.pid, p.metrics) for p in live]
    if stack.distributed:  # psutil comes with the dev extras: imported only here
        from . import distributed as bench_distributed
    # CPU of the stack from just before the due instant to the last completion.
    await trio.sleep(max((due - datetime.now(UTC)).total_seconds() - 0.2, 0.0))
    cpu_before = sum(p.cpu_seconds() for p in live)
    costs = await bench_distributed.sample(roles) if stack.distributed else {}
    await _wait_completed(stack, baseline + n)
    cpu = sum(p.cpu_seconds() for p in live) - cpu_before
    if stack.distributed:
        drained = await bench_distributed.sample(roles)
        print("burst drain cost per role (store commands, CPU):")
        print("\n".join(bench_distributed.report(costs, drained, n)))
    jobs = await _jobs(client, tenant)
    last = max(parse_time(j["updatedAt"], "updatedAt") for j in jobs)
    drain = (last - due).total_seconds()
    delays = [(parse_time(j["claimedAt"], "c") - due).total_seconds() for j in jobs]
    print(
        f"burst drain: {n} jobs in {drain:.2f}s after the due instant = "
        f"{n / drain:.0f} jobs/s (target >= {300 if stack.distributed else 4000}; {_load()})"
    )
    print(f"  CPU of the stack while draining: {cpu / n * 1e6:.0f} us per job")
    print("  " + _summary("pick delay after due instant", delays))


async def _paced(
    stack: Stack, client: Pool, name: str, rate: float, total: int
) -> tuple[list[float], list[float], int]:
    """Create ``total`` noop jobs at ``rate`` per second, each due 1 s after its creation,
    and wait for them all to complete. Returns the start delays (``claimedAt -
    scheduledAt``), the ``POST /jobs`` latencies, and how many sends ran >50 ms late."""
    tenant = f"bench-{name}-{stack.run_id}"
    latencies: list[float] = []
    late_sends = 0
    baseline = await stack.completed_total()
    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        for i in range(total):
            at = started + i / rate
            now = trio.current_time()
            if now < at:
                await trio.sleep_until(at)
            elif now - at > 0.05:
                late_sends += 1
            body = {
                "idempotencyKey": f"{tenant}-{i}",
                "tenantId": tenant,
                "jobType": "noop",
                "scheduledAt": format_time(datetime.now(UTC) + timedelta(seconds=1)),
            }
            nursery.start_soon(_post, client, body, latencies)
    await _wait_completed(stack, baseline + total)
    jobs = await _jobs(client, tenant)
    delays = [
        (parse_time(j["claimedAt"], "c") - parse_time(j["scheduledAt"], "s")).total_seconds()
        for j in jobs
    ]
    return delays, latencies, late_sends


async def steady(stack: Stack, client: Pool, args: argparse.Namespace) -> None:
    """R jobs/s for D seconds, each due 1 s after creation: start delays and ``POST /jobs``
    latencies."""
    rate = args.rate or (50.0 if stack.distributed else 200.0)
    duration = args.duration
    total = int(rate * duration)
    delays, latencies, late_sends = await _paced(stack, client, "steady", rate, total)
    print(
        f"steady: {total} jobs at {rate:.0f}/s for {duration:.0f}s, each due 1s after "
        f"creation ({late_sends} sends >50ms behind schedule)"
    )
    if stack.distributed:
        tick_ms = stack.settings.scheduler_tick * 1000
        delay_target = f"p99 <= tick + 250ms = {tick_ms + 250:.0f}ms"
        post_target = ""
    else:
        delay_target, post_target = "p99 <= 50ms", ", target p99 <= 20ms"
    label = f"start delay (claimedAt - scheduledAt), target {delay_target}"
    print("  " + _summary(label, delays))
    print("  " + _summary(f"POST /jobs latency at {rate:.0f} req/s{post_target}", latencies))


async def timer(stack: Stack, client: Pool) -> None:
    """Timer precision: 200 jobs paced at 20/s, each due 1 s after creation; the start
    delay shows how precisely the scheduler wakes for a due job (not on a tick)."""
    delays, _, late_sends = await _paced(stack, client, "timer", TIMER_RATE, TIMER_JOBS)
    target = "" if stack.distributed else ", target p99 <= 10ms"
    print(
        f"timer: {TIMER_JOBS} jobs at {TIMER_RATE:.0f}/s, each due 1s after creation "
        f"({late_sends} sends >50ms behind schedule)"
    )
    print("  " + _summary(f"start delay (claimedAt - scheduledAt){target}", delays))
    print(f"  ({_load()})")


async def failover(stack: Stack) -> None:
    """SIGKILL the leader and time the standby's takeover; then, with a new standby,
    SIGTERM the leader and time it again."""
    ttl = stack.settings.election_ttl
    for sig, target in ((signal.SIGKILL, f"TTL {ttl}s + 2s"), (signal.SIGTERM, "1s")):
        with trio.fail_after(STARTUP_TIMEOUT):
            leader = await stack.leader()
        standbys = [p for p in stack.schedulers if p is not leader and p.running()]
        if not standbys:
            standbys = [await stack.add_scheduler()]
        signalled = time.perf_counter()
        if sig == signal.SIGKILL:
            leader.kill()  # and reaped at once: the stop at the end expects no exit code
        else:
            leader.send(sig)
        with trio.fail_after(ttl + STARTUP_TIMEOUT):
            successor = await stack.leader(standbys)
        took = time.perf_counter() - signalled
        print(
            f"failover after {signal.Signals(sig).name} of {leader.name}: {successor.name} "
            f"leads {took:.2f}s later (target < {target})"
        )
        await leader.stop()
