"""The bench's scale phase: the same figures on an empty store and on one holding many
finished jobs, in one run, then a prune of them all under the steady load.

1. On the (nearly) empty store: burst drain rate, keep-alive create rate, steady start-delay
   p99, ``GET /stats``, a filtered ``GET /jobs`` page and each dashboard page (and the data
   reads their scripts make), each the median of a few requests.
2. ``--scale-jobs`` finished jobs (completed, dead-lettered and cancelled, four job types,
   finished 8 to 9 days ago; default 1,000,000 embedded, 100,000 on MongoDB) are written
   straight into the stack's store through the store port, and the same figures are taken
   again.
3. A tenant override (``PUT /retention/{tenant}``, 1 day) makes them all expired: the
   stack's reaper prunes them in its bounded batches while a steady load runs, whose p99
   (three windows pooled) is printed beside the one of as many windows just before; then
   the prune's rate, and the SQLite file's size before the fill, full, and after the prune
   gave its pages back; then once more after the jobs the bench's own phases stored since
   the file was weighed before the fill are cancelled, expired (a 1-second override of
   their tenants) and pruned too.

The stack runs with ``RETENTION_*`` of ten years (so nothing of the fill is pruned before
step 3), REAPER_INTERVAL 5 s and API_STORE_TIMEOUT 30 s. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import trio

from jobscheduler.domain.model import format_time, parse_time

from . import enqueue as bench_enqueue
from .http import Pool
from .phases import _load, _paced
from .scale_fill import file_bytes, file_mb, fill
from .stack import Stack
from .wait import until_completed

#: The stack's settings for this phase (set before it starts).
ENVIRONMENT = {
    "RETENTION_COMPLETED": "3650d",
    "RETENTION_CANCELLED": "3650d",
    "RETENTION_DLQ": "3650d",
    "REAPER_INTERVAL": "5s",
    # Figures are measured, not cut off at the API's default store deadline (2 s): on
    # FerretDB on a small machine some reads take longer than that.
    "API_STORE_TIMEOUT": "30s",
}
BURST = 5000
CREATES = 3000
STEADY_RATE = 200.0
STEADY_RATE_DISTRIBUTED = 20.0
STEADY_SECONDS = 10.0
ROUNDS = 5
#: Windows of the steady load before a prune, and as many during it.
WINDOWS = 3


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scale-jobs",
        type=int,
        help="finished jobs the scale phase fills in (1,000,000 embedded, 100,000 mongo)",
    )


async def _median_ms(client: Pool, path: str) -> float:
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        status, _ = await client.request_bytes("GET", path)
        times.append((time.perf_counter() - started) * 1000)
        if status != 200:
            raise RuntimeError(f"GET {path} -> {status}")
    return statistics.median(times)


async def drain_rate(stack: Stack, client: Pool, label: str) -> float:
    """:data:`BURST` noop jobs due at one instant: jobs per second from it to the last
    completion (the executors' completion counter, polled)."""
    tenant = f"bench-scale-burst-{label}-{stack.run_id}"
    due = (datetime.now(UTC) + timedelta(seconds=BURST / 300 + 3)).replace(microsecond=0)
    bodies = [
        {"idempotencyKey": f"{tenant}-{i}", "tenantId": tenant, "jobType": "noop",
         "scheduledAt": format_time(due)}
        for i in range(BURST)
    ]  # fmt: skip
    baseline = await stack.completed_total()
    await bench_enqueue.send_singly(client, bodies, 32)
    with trio.fail_after(600):
        await until_completed(stack.completed_total, baseline + BURST)
    last = datetime.now(UTC)  # the last completion, within a poll
    return BURST / max((last - due).total_seconds(), 1e-3)


async def create_rate(client: Pool, tenant: str) -> float:
    """:data:`CREATES` keep-alive ``POST /jobs`` (due tomorrow) over 32 connections."""
    later = format_time(datetime.now(UTC) + timedelta(days=1))
    bodies = [
        {"idempotencyKey": f"{tenant}-{i}", "tenantId": tenant, "jobType": "noop",
         "scheduledAt": later}
        for i in range(CREATES)
    ]  # fmt: skip
    started = time.perf_counter()
    await bench_enqueue.send_singly(client, bodies, 32)
    return CREATES / (time.perf_counter() - started)


async def steady_delays(stack: Stack, client: Pool, name: str) -> list[float]:
    """The start delays (seconds) of a steady load: :data:`STEADY_RATE` creates a second
    (:data:`STEADY_RATE_DISTRIBUTED` on MongoDB, which a small machine cannot take at the
    embedded rate) for :data:`STEADY_SECONDS`, each due a second after its create."""
    rate = STEADY_RATE_DISTRIBUTED if stack.distributed else STEADY_RATE
    delays, _, _ = await _paced(stack, client, name, rate, int(rate * STEADY_SECONDS))
    return delays


def p99_ms(delays: list[float]) -> float:
    """The 99th percentile of ``delays`` (seconds), in milliseconds."""
    ordered = sorted(delays)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


async def steady_p99(stack: Stack, client: Pool, name: str) -> float:
    """The start delay p99 of one window of the steady load (:func:`steady_delays`)."""
    return p99_ms(await steady_delays(stack, client, name))


async def steady_windows(stack: Stack, client: Pool, name: str) -> tuple[float, list[float]]:
    """:data:`WINDOWS` windows of the steady load one after the other: the p99 of their
    start delays pooled, and each window's."""
    pooled: list[float] = []
    each: list[float] = []
    for window in range(WINDOWS):
        delays = await steady_delays(stack, client, f"{name}-{window}")
        pooled += delays
        each.append(p99_ms(delays))
    return p99_ms(pooled), each


def _windows(each: list[float]) -> str:
    return ", ".join(f"{ms:.0f}" for ms in each)


def pages(tenant: str, job_id: str | None) -> list[tuple[str, str]]:
    """The dashboard's pages and the reads their scripts make (tests/support/ui_bench), each
    as (label, path): a job's pages are labelled ``{id}``, as the empty store's job is not
    the full store's."""
    paths = [
        "/ui",
        "/stats/overview",
        f"/stats/overview?tenantId={tenant}",
        f"/ui/jobs?tenantId={tenant}",
        f"/jobs?tenantId={tenant}&limit=50",
        f"/ui/dead-letters?tenantId={tenant}",
        f"/jobs?tenantId={tenant}&status=dlq&limit=250",
        f"/ui/cron?tenantId={tenant}",
        f"/jobs?tenantId={tenant}&cron=true&limit=1000",
        "/ui/jobs",
        "/jobs?allTenants=true&limit=50",
        "/jobs?allTenants=true&status=dlq&limit=250",
        "/tenants",
    ]
    labelled = [(path, path) for path in paths]
    if job_id is not None:
        for page in ("/ui/jobs/{id}", "/jobs/{id}", "/jobs/{id}/attempts"):
            labelled.append((page, page.replace("{id}", job_id)))
    return labelled


@attrs.define
class Figures:
    drain: float = 0.0
    creates: float = 0.0
    steady_p99_ms: float = 0.0
    stats_ms: float = 0.0
    jobs_page_ms: float = 0.0
    pages_ms: dict[str, float] = attrs.field(factory=dict)


async def measure(stack: Stack, client: Pool, tenant: str, label: str) -> Figures:
    figures = Figures()
    figures.drain = await drain_rate(stack, client, label)
    figures.creates = await create_rate(client, f"bench-scale-create-{label}-{stack.run_id}")
    figures.steady_p99_ms = await steady_p99(stack, client, f"scale-steady-{label}")
    figures.stats_ms = await _median_ms(client, "/stats")
    filtered = f"/jobs?tenantId={tenant}&status=dlq&jobType=flaky&limit=100"
    figures.jobs_page_ms = await _median_ms(client, filtered)
    _, found = await client.request("GET", f"/jobs?tenantId={tenant}&status=dlq&limit=1")
    if not found:  # the empty store: a job of the bench's own phases
        _, found = await client.request("GET", "/jobs?allTenants=true&limit=1")
    job_id = found[0]["id"] if found else None
    for page, path in pages(tenant, job_id):
        figures.pages_ms[page] = await _median_ms(client, path)
    print(f"scale: measured {label} ({_load()})")
    return figures


def report(empty: Figures, full: Figures, kept: int) -> None:
    def row(name: str, a: float, b: float, unit: str, target: str) -> None:
        ratio = b / a if a else float("nan")
        print(f"  {name:<44}{a:>10.1f}{b:>12.1f} {unit:<6}{ratio:>6.2f}x  {target}")

    print(f"scale: empty store vs {kept:,} finished jobs kept")
    print(f"  {'figure':<44}{'empty':>10}{'kept':>12} {'':<6}{'ratio':>7}  target")
    row("burst drain", empty.drain, full.drain, "jobs/s", ">= 0.9x")
    row("keep-alive creates", empty.creates, full.creates, "req/s", ">= 0.9x")
    row("steady start delay p99", empty.steady_p99_ms, full.steady_p99_ms, "ms", "")
    row("GET /stats", empty.stats_ms, full.stats_ms, "ms", "<= 20 ms")
    row("GET /jobs (tenant, dlq, type; 100)", empty.jobs_page_ms, full.jobs_page_ms, "ms", "")
    for label, ms in full.pages_ms.items():
        row(label[:44], empty.pages_ms.get(label, 0.0), ms, "ms", "<= 200 ms")


async def prune_under_load(stack: Stack, client: Pool, tenant: str) -> None:
    """Run :data:`WINDOWS` windows of the steady load, expire the fill (a 1-day tenant
    override), run as many again while the reaper prunes it, then wait for the last job to
    go and for the file's pages to come back."""
    quiet, quiet_each = await steady_windows(stack, client, "scale-steady-quiet")
    asked = datetime.now(UTC) - timedelta(seconds=2)
    await _keep(client, tenant, "1d")
    started = time.perf_counter()
    await trio.sleep(6)  # the reaper's next sweep (REAPER_INTERVAL 5 s) has begun
    during, during_each = await steady_windows(stack, client, "scale-steady-prune")
    left = await _left(client, tenant)
    print(
        f"scale: steady start delay p99 while pruning {during:.1f} ms vs {quiet:.1f} ms "
        f"just before ({during / quiet:.2f}x, target <= 1.5x; {WINDOWS} windows of "
        f"{STEADY_SECONDS:.0f} s each, pooled; each window's: {_windows(during_each)} ms "
        f"while pruning, {_windows(quiet_each)} ms before); {left:,} jobs still to prune"
    )
    with trio.fail_after(3600):
        # Polling another process's counts: there is no event to wait on.
        while await _left(client, tenant):  # noqa: ASYNC110
            await trio.sleep(2)
    took = time.perf_counter() - started
    print(f"scale: pruned in about {took:.0f}s ({_load()})")
    with trio.fail_after(3600):
        last = await _until_swept(client, asked)
    print(f"scale: the reaper's sweep, pages handed back included: {last}")


async def _keep(client: Pool, tenant: str, duration: str) -> None:
    """Give ``tenant`` a retention override of ``duration`` for every prunable status."""
    keep = dict.fromkeys(("completed", "cancelled", "dlq"), duration)
    status, body = await client.request("PUT", f"/retention/{tenant}", keep)
    if status != 200:
        raise RuntimeError(f"PUT /retention/{tenant} -> {status}: {body}")


async def _until_swept(client: Pool, asked: datetime) -> dict[str, Any]:
    """Wait for a prune sweep that began after ``asked`` to end (a sweep records its
    summary, GET /retention's ``lastPrune``, once it has handed the freed pages back), and
    return that summary."""
    while True:
        status, rules = await client.request("GET", "/retention")
        if status != 200:
            raise RuntimeError(f"GET /retention -> {status}")
        last: dict[str, Any] = rules.get("lastPrune") or {}
        if last and parse_time(last["at"], "at") >= asked:
            return last
        await trio.sleep(2)  # polling another process's record: no event to wait on


async def _left(client: Pool, tenant: str) -> int:
    """The jobs ``tenant`` holds (every tenant's: ``""``)."""
    path = f"/stats?tenantId={tenant}" if tenant else "/stats"
    status, stats = await client.request("GET", path)
    if status != 200:
        raise RuntimeError(f"GET /stats -> {status}")
    return sum(int(n) for n in stats["byStatus"].values())


async def prune_own(stack: Stack, client: Pool) -> None:
    """Cancel and expire the jobs the bench's phases stored after the file was weighed
    before the fill (each phase in a tenant of its own), and wait until the reaper has
    pruned them and handed their pages back."""
    asked = datetime.now(UTC) - timedelta(seconds=2)
    phases = ["burst-kept", "create-kept", "steady-kept"]
    phases += [
        f"steady-{when}-{window}" for when in ("quiet", "prune") for window in range(WINDOWS)
    ]
    tenants = [f"bench-scale-{phase}-{stack.run_id}" for phase in phases]
    for tenant in tenants:
        status, body = await client.request(
            "POST", "/jobs/cancel", {"filter": {"tenantId": tenant}}
        )
        if status != 200:
            raise RuntimeError(f"POST /jobs/cancel -> {status}: {body}")
        await _keep(client, tenant, "1s")
    with trio.fail_after(600):
        for tenant in tenants:
            while await _left(client, tenant):  # noqa: ASYNC110 (another process's counts)
                await trio.sleep(2)
        await _until_swept(client, asked)


async def scale(stack: Stack, client: Pool, args: argparse.Namespace) -> None:
    kept = args.scale_jobs or (100_000 if stack.distributed else 1_000_000)
    tenant = f"bench-scale-{stack.run_id}"
    empty = await measure(stack, client, tenant, "empty")
    before = file_bytes(stack)
    print(f"scale: store file before the fill {file_mb(stack)}")
    await fill(stack, tenant, kept)
    print(f"scale: store file with the fill {file_mb(stack)}")
    print(f"scale: {(file_bytes(stack) - before) / kept:.0f} bytes a filled job")
    full = await measure(stack, client, tenant, "kept")
    report(empty, full, kept)
    await prune_under_load(stack, client, tenant)
    if not before:
        return  # MongoDB: no file to weigh
    after = file_bytes(stack)
    print(
        f"scale: store file after the prune {file_mb(stack)} = {after / before:.2f}x the size "
        "before the fill, with the jobs the bench's own phases stored since"
    )
    # Those phases stored as many jobs again as the file held before the fill, and no
    # retention expires them yet: pruned too, the file is weighed with what it held then.
    await prune_own(stack, client)
    after = file_bytes(stack)
    print(
        f"scale: store file once those are pruned too {file_mb(stack)} = "
        f"{after / before:.2f}x the size before the fill (target <= 2x)"
    )


def prepare_environment() -> None:
    """The stack's settings for this phase (the caller's own win)."""
    for name, value in ENVIRONMENT.items():
        os.environ.setdefault(name, value)
