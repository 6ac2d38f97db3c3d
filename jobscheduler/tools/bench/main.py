"""``jobscheduler bench``: the performance targets, measured through the public HTTP API.

``--stack embedded`` (the default) starts a fresh ``jobscheduler dev`` subprocess on a
temporary SQLite file and free ports. ``--stack distributed`` starts one process per role
(``run-api``, two ``run-scheduler``, ``run-executor`` for ``noop``, ``run-reaper``) on the
MongoDB, Kafka and etcd of the environment (``just deps-up``), in a fresh database and
election. Either way it measures, printing figures (never asserting them — machines are
shared and noisy):

1. idle RSS of the processes;
2. burst drain: N ``noop`` jobs all due at one instant; drain rate = N / (last completion -
   due instant), from the jobs' own ``updatedAt``;
3. steady load: R jobs/s for D seconds, each due 1 s after creation; start delay
   (``claimedAt - scheduledAt``) percentiles and ``POST /jobs`` latency percentiles;
   then timer precision: 200 jobs at 20/s, each due 1 s after creation,
   start delay percentiles;
4. enqueue+drain: 20,000 due ``noop`` jobs sent in batches of 1,000 through
   ``POST /jobs/batch``, then as many through one ``POST /jobs`` each; the rate from the
   first request to the last completion (:mod:`jobscheduler.tools.bench.enqueue`);
5. ``workflows`` (asked for by name): a chain of 1,000 steps, a fan-out of 10,000
   children against as many independent jobs, a 100-step DAG
   (:mod:`~jobscheduler.tools.bench.workflows`);
6. scale (``--phases scale``): the figures on an empty store and on one holding 1,000,000
   finished jobs (100,000 on MongoDB), then a prune of them under load
   (:mod:`jobscheduler.tools.bench.scale`);
7. distributed only: failover, the time from SIGKILL (then SIGTERM) of the leading scheduler
   until the standby reports ``scheduler_is_leader 1``.

Client and server share the machine. To keep the client's share small, requests go through
a minimal keep-alive HTTP/1.1 client on raw trio streams (httpx costs several times more CPU
per request than the server under test).

This module is the command: its options and the order of the phases. The client is
:mod:`~jobscheduler.tools.bench.http`, the processes under test
:mod:`~jobscheduler.tools.bench.stack`, the burst, steady, timer and failover phases
:mod:`~jobscheduler.tools.bench.phases`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import trio

from jobscheduler.config import Settings
from jobscheduler.domain.durations import parse_duration
from jobscheduler.errors import ConfigError

from . import create as bench_create
from . import enqueue as bench_enqueue
from . import enqueue_code as bench_enqueue_code
from . import flow as bench_flow
from . import phases as bench_phases
from . import scale as bench_scale
from . import workflows as bench_workflows
from .http import FreshPool, Pool
from .stack import Stack


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stack",
        choices=("embedded", "distributed"),
        default="embedded",
        help="`dev` on SQLite (default), or one process per role on MongoDB/Kafka/etcd",
    )
    parser.add_argument("--burst", type=int, default=5000, help="jobs in the burst (5000)")
    parser.add_argument("--rate", type=float, help="steady jobs/s (200 embedded, 50 distributed)")
    parser.add_argument(
        "--duration", type=parse_duration, default=20.0, help="steady phase length (20s)"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="HTTP connections (32)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (database, log)"
    )
    parser.add_argument(
        "--auth",
        choices=("off", "required"),
        default="off",
        help="AUTH of the stack; with required, requests carry an all-tenant admin key (off)",
    )
    parser.add_argument(
        "--fresh-connections",
        action="store_true",
        help="open a connection per request, as curl does (default: keep-alive)",
    )
    parser.add_argument(
        "--store",
        choices=("sqlite", "mongo"),
        help="the store: sqlite is --stack embedded, mongo --stack distributed (FerretDB)",
    )
    bench_enqueue.configure(parser)
    bench_create.configure(parser)
    bench_workflows.configure(parser)
    bench_flow.configure(parser)
    bench_scale.configure(parser)


async def _run(stack: Stack, args: argparse.Namespace) -> None:
    """Start the stack, run the chosen phases on it, print what they measure, stop it."""
    try:
        await stack.start()
        await trio.sleep(3)
        print(f"stack: {args.stack}, workdir {stack.workdir}")
        for process in stack.processes:
            print(f"idle RSS of {process.name}: {process.rss_mb():.1f} MB (target <= 150 MB)")
        print(f"auth: {args.auth}")
        make_pool = FreshPool if args.fresh_connections else Pool
        client = make_pool(stack.api, args.concurrency, stack.key)
        phases = {p.strip() for p in args.phases.split(",")}
        try:
            if "create" in phases:
                await bench_create.create_phase(stack, args, stack.run_id)
            if "burst" in phases:
                await bench_phases.burst(stack, client, args)
            if "steady" in phases:
                await bench_phases.steady(stack, client, args)
            if "timer" in phases:
                await bench_phases.timer(stack, client)
            if "enqueue-code" in phases:
                await bench_enqueue_code.enqueue_code(
                    stack.api, stack.key, stack.completed_total, args.enqueue_code, stack.run_id
                )
                await bench_enqueue_code.sequential_floor(stack, args.enqueue_code)
            if "fairness" in phases:
                await bench_flow.fairness(stack, args)
            if "keyed" in phases:
                await bench_flow.keyed(stack, client, args)
            if "rated" in phases:
                await bench_flow.rated(stack, client, args)
            if "scale" in phases:
                await bench_scale.scale(stack, client, args)
            if "enqueue" in phases:
                await bench_enqueue.enqueue_drain(
                    client, stack.completed_total, args, stack.run_id, stack.cpu_seconds
                )
            if "workflows" in phases:
                await bench_workflows.workflows(stack, client, args)
        finally:
            await client.aclose()
        for process in stack.processes:
            if process.running():  # the create phase's servers are stopped by then
                print(f"RSS of {process.name} after load: {process.rss_mb():.1f} MB")
        if stack.distributed:
            await bench_phases.failover(stack)
    finally:
        with trio.CancelScope(shield=True):
            await stack.stop()


def run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"jobscheduler bench: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.store is not None:
        args.stack = "distributed" if args.store == "mongo" else "embedded"
    phases = {p.strip() for p in args.phases.split(",")}
    if args.stack == "distributed" and "keyed" in phases and args.keyed_sleep_ms is not None:
        print(
            "jobscheduler bench: --keyed-sleep-ms needs the embedded stack "
            "(the distributed one runs an executor of noop only)",
            file=sys.stderr,
        )
        return 2
    if "scale" in phases:
        bench_scale.prepare_environment()
    if (
        args.stack == "distributed"
        and phases & {"keyed", "rated"}
        and "FLOW_CONTROL" not in os.environ
    ):
        # Their limits are enforced only with flow control, which MongoDB leaves off by default.
        os.environ["FLOW_CONTROL"] = "1"
        print("FLOW_CONTROL=1 for this run (the keyed and rated phases measure limits)")
    workdir = Path(tempfile.mkdtemp(prefix="jobscheduler-bench-"))
    stack = Stack(
        distributed=args.stack == "distributed", auth=args.auth, workdir=workdir, settings=settings
    )
    print(f"jobscheduler bench on {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    try:
        trio.run(_run, stack, args)
    finally:
        if not args.keep:
            for path in sorted(workdir.rglob("*"), reverse=True):
                path.unlink() if path.is_file() else path.rmdir()
            workdir.rmdir()
    return 0
