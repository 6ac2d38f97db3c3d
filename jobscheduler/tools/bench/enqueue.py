"""The bench's enqueue+drain phase: N due ``noop`` jobs sent through ``POST /jobs/batch``
(batches of 1,000) and then through one ``POST /jobs`` per job; for each, the rate from the
first request to the last completion (counted by the executor's metrics).

Used by :mod:`jobscheduler.tools.bench.main`; kept apart so that module stays one concern each.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import trio

from jobscheduler.api.routes.batch import MAX_BATCH
from jobscheduler.domain.model import format_time

from .wait import until_completed

#: How many batch requests are in flight at once.
BATCH_CONCURRENCY = 4


class Client(Protocol):
    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]: ...


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--enqueue", type=int, default=20_000, help="jobs in the bulk enqueue+drain phase (20000)"
    )
    parser.add_argument(
        "--enqueue-single",
        type=int,
        default=None,
        help="jobs in its one-request-per-job run (default: as many as --enqueue)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=MAX_BATCH, help=f"jobs per batch ({MAX_BATCH})"
    )
    parser.add_argument(
        "--phases",
        default="create,burst,steady,timer,enqueue",
        help="comma list of phases to run: create, burst, steady, timer, enqueue (these by "
        "default), enqueue-code, workflows, fairness, keyed, rated (flow control), and scale "
        "(an empty store against one of a million finished jobs, and their prune)",
    )
    parser.add_argument(
        "--enqueue-code",
        type=int,
        default=5000,
        help="jobs the enqueue-code phase sends by a task handle's .enqueue() (5000)",
    )


def noop_bodies(tenant: str, n: int, due: datetime, **extra: Any) -> list[dict[str, Any]]:
    """``n`` create bodies of noop jobs of ``tenant`` (keys ``<tenant>-<i>``) due at ``due``;
    each ``extra`` field is a value, or a function of ``i``."""
    at = format_time(due)
    return [
        {
            "idempotencyKey": f"{tenant}-{i}",
            "tenantId": tenant,
            "jobType": "noop",
            "scheduledAt": at,
            **{k: (v(i) if callable(v) else v) for k, v in extra.items()},
        }
        for i in range(n)
    ]


def whole_second_after(seconds: float) -> datetime:
    """The first whole second at least ``seconds`` from now, past a second boundary (the
    instant a burst is due)."""
    due = datetime.now(UTC) + timedelta(seconds=seconds)
    return due.replace(microsecond=0) + timedelta(seconds=1)


async def _drain(completed_total: Callable[[], Awaitable[float]], target: float) -> float:
    """Wait until ``target`` jobs completed in all; returns when (perf_counter)."""
    with trio.fail_after(600):
        await until_completed(completed_total, target)
    return time.perf_counter()


#: Times a batch answered 503 is sent again before the phase gives up.
BUSY_RETRIES = 5


async def send_batches(client: Client, bodies: list[dict[str, Any]], size: int) -> None:
    """``POST /jobs/batch`` of ``size`` bodies each, a few at once; a refusal raises."""
    send, receive = trio.open_memory_channel[list[dict[str, Any]]](len(bodies) // size + 1)
    for start in range(0, len(bodies), size):
        send.send_nowait(bodies[start : start + size])
    send.close()

    async def worker() -> None:
        async for chunk in receive:
            status, reply = await client.request("POST", "/jobs/batch", {"jobs": chunk})
            for _ in range(BUSY_RETRIES):
                if status != 503:
                    break
                # The store is busy (a loaded machine): send the same chunk again, as a
                # client should; its idempotency keys make a repeat harmless.
                await trio.sleep(1.0)
                status, reply = await client.request("POST", "/jobs/batch", {"jobs": chunk})
            if status != 200:
                raise RuntimeError(f"POST /jobs/batch -> {status}: {reply}")
            # 409: stored by an earlier try of a chunk sent again (the same key).
            refused = [r for r in reply["results"] if r["status"] not in (201, 409)]
            if refused:
                raise RuntimeError(f"POST /jobs/batch refused {len(refused)}: {refused[0]}")

    async with trio.open_nursery() as nursery:
        for _ in range(BATCH_CONCURRENCY):
            nursery.start_soon(worker)


#: Tries of one create answered 503 (the store busy), a second apart, before the bench fails.
TRIES_ON_503 = 30


async def post_job(client: Client, body: dict[str, Any]) -> str:
    """``POST /jobs`` ``body``; the stored job's id. A 503 is sent again with the same key
    after its ``Retry-After`` second, as the docs tell clients (a busy store, e.g. FerretDB
    on a small machine, answers some), and a 409 to such a retry means the first try was
    stored after all (its ``jobId``); any other refusal raises."""
    retried = False
    for _ in range(TRIES_ON_503):
        status, reply = await client.request("POST", "/jobs", body)
        if status != 503:
            break
        retried = True
        await trio.sleep(1.0)
    if status == 201:
        return str(reply["id"])
    if status == 409 and retried and isinstance(reply, dict) and reply.get("jobId"):
        return str(reply["jobId"])
    raise RuntimeError(f"POST /jobs -> {status}: {reply}")


async def send_singly(client: Client, bodies: list[dict[str, Any]], concurrency: int) -> None:
    """``POST /jobs`` each body over ``concurrency`` workers (:func:`post_job`)."""
    send, receive = trio.open_memory_channel[dict[str, Any]](len(bodies))
    for body in bodies:
        send.send_nowait(body)
    send.close()

    async def worker() -> None:
        async for body in receive:
            await post_job(client, body)

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)


async def enqueue_drain(
    client: Client,
    completed_total: Callable[[], Awaitable[float]],
    args: argparse.Namespace,
    run_id: str,
    cpu_seconds: Callable[[], float] | None = None,
) -> None:
    """Run the phase and print its figures (bulk first, then single); with ``cpu_seconds``
    (the stack's CPU time so far), also the stack's CPU per job."""
    n, size = args.enqueue, args.batch_size
    n_single = args.enqueue_single if args.enqueue_single is not None else n
    rates: dict[str, float] = {}
    for mode, count in (("batch", n), ("single", n_single)):
        if count <= 0:
            continue
        bodies = noop_bodies(
            f"bench-enqueue-{mode}-{run_id}", count, datetime.now(UTC) - timedelta(seconds=1)
        )
        baseline = await completed_total()
        cpu_before = cpu_seconds() if cpu_seconds is not None else 0.0
        started = time.perf_counter()
        if mode == "batch":
            await send_batches(client, bodies, size)
            requests = -(-count // size)
            how = f"{requests} x POST /jobs/batch ({size} each, {BATCH_CONCURRENCY} at once)"
        else:
            await send_singly(client, bodies, args.concurrency)
            how = f"POST /jobs x {count} ({args.concurrency} connections)"
        sent = time.perf_counter() - started
        took = await _drain(completed_total, baseline + count) - started
        cpu = (
            f", CPU of the stack {(cpu_seconds() - cpu_before) / count * 1e6:.0f} us per job"
            if cpu_seconds is not None
            else ""
        )
        rates[mode] = count / took
        print(
            f"enqueue+drain {mode}: {count} noop jobs via {how}: sent in {sent:.2f}s "
            f"({count / sent:.0f} jobs/s accepted), last completed {took:.2f}s after the first "
            f"request = {rates[mode]:.0f} jobs/s"
            + (" (target >= 2500)" if mode == "batch" else "")
            + f" (load average {os.getloadavg()[0]:.1f}{cpu})"
        )
    if len(rates) == 2:
        print(f"  bulk vs single enqueue+drain: {rates['batch'] / rates['single']:.1f}x")
