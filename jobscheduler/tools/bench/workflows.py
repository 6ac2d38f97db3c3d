"""The bench's ``workflows`` phase: what releasing steps costs.

1. a chain of N ``noop`` steps (1,000: ``--chain``), each depending on the one before: steps
   per second from the workflow's creation to its end (its record's ``createdAt`` and
   ``finishedAt``);
2. a fan-out: one ``bench-fan-out`` step (:mod:`~jobscheduler.tools.bench.fanout_app`)
   spawns M ``noop`` children (10,000: ``--fan-out``) and a sink waits for them all
   (``afterChildrenOf``); the children's drain, from the spawner's completion (when they are
   released) to the last child's completion, against the burst drain of M independent
   ``noop`` jobs all due at one instant (from the due instant to the last completion), both
   timed the same way, on the executor's completion counter. The sink, which cannot end
   before the last child, is not one of the drained jobs: how long after them it completed
   is printed apart;
3. a DAG of 100 ``noop`` steps (one root, a fan-out of 98, a fan-in to one sink): its time
   from creation to its end.

Figures are printed, never asserted (machines are shared and noisy). The fan-out needs the
bench's app, which only the embedded stack's ``dev`` loads; the distributed stack runs 1 and 3.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import UTC, datetime
from typing import Any

import trio

from jobscheduler.api.routes.batch import MAX_BATCH
from jobscheduler.domain.model import parse_time

from . import enqueue as bench_enqueue
from .http import Pool
from .stack import Stack
from .wait import until_completed

#: How long a phase's workflow may take before the bench gives up.
TIMEOUT = 600.0
#: Margin between sending the independent burst and its due instant, per 1,000 jobs.
SEND_MARGIN = 1.5


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chain", type=int, default=1000, help="steps in the workflows phase's chain (1000)"
    )
    parser.add_argument(
        "--fan-out", type=int, default=10000, help="children of its fan-out (10000)"
    )


def _load() -> str:
    return f"load average {os.getloadavg()[0]:.1f}"


async def _create(client: Pool, body: dict[str, Any]) -> dict[str, Any]:
    status, created = await client.request("POST", "/workflows", body)
    if status != 201:
        raise RuntimeError(f"POST /workflows -> {status}: {str(created)[:500]}")
    return dict(created)


async def _ended(client: Pool, tenant: str, workflow_id: str) -> dict[str, Any]:
    """The workflow once it ended (polled through the listing: no steps read)."""
    with trio.fail_after(TIMEOUT):
        while True:
            status, rows = await client.request("GET", f"/workflows?tenantId={tenant}&limit=5")
            if status != 200:
                raise RuntimeError(f"GET /workflows -> {status}: {rows}")
            for row in rows:
                if row["id"] == workflow_id and row["status"] in ("completed", "failed"):
                    return dict(row)
            await trio.sleep(0.05)


def _took(workflow: dict[str, Any]) -> float:
    finished = parse_time(workflow["finishedAt"], "finishedAt")
    return (finished - parse_time(workflow["createdAt"], "createdAt")).total_seconds()


async def _wait_completed(stack: Stack, target: float) -> datetime:
    """Wait until ``target`` completions in all; when (wall clock, UTC)."""
    with trio.fail_after(TIMEOUT):
        await until_completed(stack.completed_total, target)
    return datetime.now(UTC)


async def chain(stack: Stack, client: Pool, n: int) -> None:
    tenant = f"bench-chain-{stack.run_id}"
    steps = [
        {"name": f"s{i}", "jobType": "noop", **({"dependsOn": [f"s{i - 1}"]} if i else {})}
        for i in range(n)
    ]
    created = await _create(client, {"tenantId": tenant, "idempotencyKey": "chain", "steps": steps})
    done = await _ended(client, tenant, created["id"])
    took = _took(done)
    print(
        f"workflows chain: {n} noop steps one after another, {done['status']} in {took:.2f}s = "
        f"{n / took:.0f} steps/s (target >= 200; {_load()})"
    )


async def independent_burst(stack: Stack, client: Pool, n: int) -> float:
    """The drain rate (jobs/s) of ``n`` independent noop jobs all due at one instant."""
    tenant = f"bench-wf-burst-{stack.run_id}"
    due = bench_enqueue.whole_second_after(3 + SEND_MARGIN * n / 1000)
    bodies = bench_enqueue.noop_bodies(tenant, n, due)
    baseline = await stack.completed_total()
    await bench_enqueue.send_batches(client, bodies, MAX_BATCH)
    if datetime.now(UTC) >= due:
        raise RuntimeError("sending the burst overran its due instant; try a smaller --fan-out")
    end = await _wait_completed(stack, baseline + n)
    drain = (end - due).total_seconds()
    print(
        f"  {n} independent noop jobs due at one instant: drained in {drain:.2f}s = "
        f"{n / drain:.0f} jobs/s"
    )
    return n / drain


async def _step_job(client: Pool, workflow: dict[str, Any], name: str) -> dict[str, Any]:
    job_id = next(s["jobId"] for s in workflow["steps"] if s["name"] == name)
    status, job = await client.request("GET", f"/jobs/{job_id}")
    if status != 200:
        raise RuntimeError(f"GET /jobs/{job_id} -> {status}: {job}")
    return dict(job)


async def fan_out(stack: Stack, client: Pool, n: int) -> float:
    """The drain rate (jobs/s) of ``n`` children spawned by one step."""
    tenant = f"bench-fan-out-{stack.run_id}"
    steps = [
        {"name": "fan", "jobType": "bench-fan-out", "payload": {"children": n}},
        {"name": "sink", "jobType": "noop", "afterChildrenOf": ["fan"]},
    ]
    baseline = await stack.completed_total()
    started = time.perf_counter()
    created = await _create(client, {"tenantId": tenant, "idempotencyKey": "fan", "steps": steps})
    # The spawner completes first, then its children; the sink only after the last of them,
    # so the n + 1st completion is the children's last (the sink's wait is reported apart).
    end = await _wait_completed(stack, baseline + n + 1)
    done = await _ended(client, tenant, created["id"])
    spawner, sink = [await _step_job(client, created, name) for name in ("fan", "sink")]
    released = parse_time(spawner["updatedAt"], "updatedAt")
    sink_wait = (parse_time(sink["updatedAt"], "updatedAt") - end).total_seconds()
    drain = (end - released).total_seconds()
    print(
        f"  {n} children of one step (ctx.spawn_many, {done['status']} with its sink in "
        f"{time.perf_counter() - started:.2f}s): drained in {drain:.2f}s after the spawner "
        f"completed = {n / drain:.0f} jobs/s; the sink completed "
        f"{sink_wait:.2f}s after the last child"
    )
    return n / drain


async def diamond(stack: Stack, client: Pool) -> None:
    tenant = f"bench-dag-{stack.run_id}"
    middle = [f"part-{i:02d}" for i in range(98)]
    steps = [
        {"name": "root", "jobType": "noop"},
        *({"name": name, "jobType": "noop", "dependsOn": ["root"]} for name in middle),
        {"name": "sink", "jobType": "noop", "dependsOn": middle},
    ]
    created = await _create(client, {"tenantId": tenant, "idempotencyKey": "dag", "steps": steps})
    done = await _ended(client, tenant, created["id"])
    print(
        f"workflows DAG: 100 noop steps (1 root, a fan-out of 98, 1 sink) {done['status']} "
        f"in {_took(done):.2f}s ({_load()})"
    )


async def workflows(stack: Stack, client: Pool, args: argparse.Namespace) -> None:
    """Run the phase (see the module docstring) and print its figures."""
    await chain(stack, client, args.chain)
    if stack.distributed:
        print("workflows fan-out: skipped (the bench's fan-out app runs on the embedded stack)")
    else:
        n = args.fan_out
        print(f"workflows fan-out of {n} children vs {n} independent jobs:")
        alone = await independent_burst(stack, client, n)
        spawned = await fan_out(stack, client, n)
        print(
            f"  fan-out drain / independent drain = {spawned / alone:.2f}x "
            f"(target >= 0.8; {_load()})"
        )
    await diamond(stack, client)
