"""The bench's ``enqueue-code`` phase: N ``noop`` jobs enqueued one at a time by a task
handle's ``.enqueue()`` from one separate Python process (as an app would: one client,
kept alive), against the stack under test; the rate from the first enqueue to the last
completion. Each ``.enqueue()`` returns only once its job is stored, so the loop is one
round trip per job.

Beside it, the floor any one-at-a-time client meets: the create phase's echo route (a
quart-trio route on hypercorn that does nothing but parse and echo its body, served as the
API is) answering N requests one after another from the leanest Python client there is
(``http.client`` on one kept-alive connection). No ``.enqueue()`` over HTTP can go faster.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable

import trio

from .stack import Stack
from .wait import until_completed

#: The enqueuing process: a registry with ``noop``, its handle, a loop of ``.enqueue()``.
SCRIPT = """
import sys, time
from jobscheduler.handlers import HandlerRegistry

async def noop(ctx):
    pass

registry = HandlerRegistry()
handle = registry.register("noop", noop)
registry.connect(sys.argv[1], api_key=sys.argv[2] or None)
n, tenant = int(sys.argv[3]), sys.argv[4]
handle.enqueue(tenant_id=tenant)  # the connection opened before the clock starts
started = time.time()
for _ in range(n):
    handle.enqueue(tenant_id=tenant)
print(started, time.time(), flush=True)
"""


#: The floor's client: ``http.client``, one connection, one request at a time.
FLOOR_SCRIPT = """
import http.client, json, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
conn = http.client.HTTPConnection("127.0.0.1", port)
headers = {"content-type": "application/json"}

def post(i):
    conn.request("POST", "/echo", json.dumps({"i": i}), headers)
    reply = conn.getresponse()
    reply.read()
    if reply.status != 201:
        raise SystemExit(f"POST /echo -> {reply.status}")

post(-1)  # the connection opened before the clock starts
started = time.perf_counter()
for i in range(n):
    post(i)
print(n / (time.perf_counter() - started), flush=True)
"""


async def sequential_floor(stack: Stack, n: int) -> float:
    """Requests/s of the echo route, one at a time from ``http.client`` (see the module doc);
    printed and returned."""
    server = await stack.start_server("enqueue-floor-echo", echo=True)
    try:
        port = server.url.rsplit(":", 1)[1]
        argv = [sys.executable, "-c", FLOOR_SCRIPT, port, str(n)]
        result = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"the floor's client failed:\n{result.stderr.decode()[-2000:]}")
    finally:
        await server.stop()
    rate = float(result.stdout)
    print(
        f"  the floor: the echo route (does nothing) answers {rate:.0f} requests/s one at a "
        f"time from http.client on one kept-alive connection ({n} requests)"
    )
    return rate


async def enqueue_code(
    api: str,
    key: str | None,
    completed_total: Callable[[], Awaitable[float]],
    n: int,
    run_id: str,
) -> float:
    """Run the phase, print its figure, return the rate (jobs/s)."""
    baseline = await completed_total()
    tenant = f"bench-enqueue-code-{run_id}"
    argv = [sys.executable, "-c", SCRIPT, api, key or "", str(n), tenant]
    result = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"the enqueuing process failed:\\n{result.stderr.decode()[-2000:]}")
    started, sent = (float(x) for x in result.stdout.split())
    with trio.fail_after(600):
        await until_completed(completed_total, baseline + n + 1)
    done = time.time()
    rate = n / (done - started)
    print(
        f"enqueue-code: {n} noop jobs by .enqueue() one at a time from one process: sent in "
        f"{sent - started:.2f}s ({n / (sent - started):.0f} jobs/s stored), last completed "
        f"{done - started:.2f}s after the first = {rate:.0f} jobs/s "
        f"(load average {os.getloadavg()[0]:.1f})"
    )
    return rate
