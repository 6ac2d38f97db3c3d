"""The traffic of ``jobscheduler loadtest``: the open-loop senders, the poller that finds
finished jobs, the progress lines, and the run that ties them together.

``POST /jobs`` goes out on a fixed timetable with at most ``--concurrency`` requests in
flight; finished jobs are found by listing the run's tenants by final status in rounds.
Everything observed is recorded in the :class:`~jobscheduler.tools.loadtest.state.LoadState`.
"""

from __future__ import annotations

import signal
import sys
from datetime import UTC, datetime
from typing import Any

import httpx
import trio

from jobscheduler.domain import states
from jobscheduler.domain.model import MAX_LIST_LIMIT, format_time
from jobscheduler.errors import LoadTestError

from .state import Accepted, LoadState

REQUEST_TIMEOUT = 10.0
POLL_INTERVAL = 1.0  # results use server timestamps, so polling faster only adds load
PROGRESS_INTERVAL = 1.0
#: Listed in each poll round: a job the run sent is finished once in one of them (a job
#: cancelled meanwhile included, or the run would wait for it until its deadline).
FINAL_STATUSES = tuple(status.value for status in states.FINAL)


async def send_one(
    client: httpx.AsyncClient, state: LoadState, index: int, intended: float
) -> None:
    """POST one job and record its outcome (never raises for HTTP or transport errors)."""
    options = state.options
    state.send_lags.append(max(0.0, trio.current_time() - intended))
    sent_at = datetime.now(UTC)
    if state.first_send_at is None:
        state.first_send_at = sent_at
    tenant = state.tenant_for(index)
    body = {
        "idempotencyKey": f"{options.tenant}-{state.run_id}-{index:07d}",
        "tenantId": tenant,
        "jobType": options.job_type,
        "payload": options.payload,
        "scheduledAt": format_time(sent_at),
    }
    state.sent += 1
    state.in_flight += 1
    began = trio.current_time()
    try:
        response = await client.post("/jobs", json=body)
    except httpx.HTTPError as exc:
        state.record_error(type(exc).__name__, str(exc) or type(exc).__name__)
        return
    finally:
        state.in_flight -= 1
    elapsed = trio.current_time() - began
    if response.status_code != 201:
        state.record_error(f"HTTP {response.status_code}", response.text)
        return
    try:
        job_id = response.json()["id"]
    except (ValueError, KeyError, TypeError):
        state.record_error("bad 201 body", response.text)
        return
    state.ack_latencies.append(elapsed)
    state.accepted[job_id] = Accepted(index=index, job_id=job_id, tenant=tenant, sent_at=sent_at)


async def send_all(client: httpx.AsyncClient, state: LoadState) -> None:
    """Start one POST per timetable slot; wait for the last response."""
    options = state.options
    slots = trio.Semaphore(options.concurrency)

    async def guarded(index: int, intended: float) -> None:
        try:
            await send_one(client, state, index, intended)
        finally:
            slots.release()

    async with trio.open_nursery() as nursery:
        for index in range(options.total):
            intended = state.started + index / options.rate
            await trio.sleep_until(intended)
            await slots.acquire()
            nursery.start_soon(guarded, index, intended)
    state.sending_done = True


async def list_jobs(client: httpx.AsyncClient, tenant: str, status: str | None) -> list[Any]:
    params = {"tenantId": tenant, "limit": str(MAX_LIST_LIMIT)}
    if status is not None:
        params["status"] = status
    response = await client.get("/jobs", params=params)
    if response.status_code != 200:
        raise httpx.HTTPStatusError(
            f"GET /jobs returned {response.status_code}",
            request=response.request,
            response=response,
        )
    jobs = response.json()
    if not isinstance(jobs, list):
        raise ValueError("GET /jobs did not return a JSON array")
    return jobs


async def poll_round(client: httpx.AsyncClient, state: LoadState) -> None:
    """One pass over the run's tenants: record every newly finished accepted job."""
    for tenant in state.unfinished_tenants():
        for status in FINAL_STATUSES:
            try:
                jobs = await list_jobs(client, tenant, status)
            except (httpx.HTTPError, ValueError) as exc:
                state.poll_errors[type(exc).__name__] += 1
                continue
            for job in jobs:
                job_id = job.get("id") if isinstance(job, dict) else None
                if job_id in state.accepted and job_id not in state.finished:
                    state.finished[job_id] = job


async def poll(client: httpx.AsyncClient, state: LoadState) -> None:
    """Poll in rounds until sending is over and every accepted job has finished."""
    while True:
        await poll_round(client, state)
        if state.sending_done and len(state.finished) == len(state.accepted):
            state.all_finished.set()
            return
        await trio.sleep(POLL_INTERVAL)


async def report_progress(state: LoadState) -> None:
    total = state.options.total
    while True:
        await trio.sleep(PROGRESS_INTERVAL)
        elapsed = trio.current_time() - state.started
        phase = "waiting" if state.sending_done else "sending"
        errors = sum(state.errors.values())
        print(
            f"[{elapsed:6.1f}s] {phase}: sent {state.sent}/{total}  "
            f"accepted {len(state.accepted)}  errors {errors}  in-flight {state.in_flight}  "
            f"finished {len(state.finished)}/{len(state.accepted)}",
            file=sys.stderr,
            flush=True,
        )


async def describe_unfinished(client: httpx.AsyncClient, state: LoadState) -> None:
    """Count the last known status of unfinished jobs (one list per tenant, bounded)."""
    with trio.move_on_after(5):
        for tenant in state.unfinished_tenants():
            try:
                jobs = await list_jobs(client, tenant, None)
            except (httpx.HTTPError, ValueError):
                state.unfinished_statuses["unknown (list failed)"] += 1
                continue
            for job in jobs:
                if (
                    isinstance(job, dict)
                    and job.get("id") in state.accepted
                    and job.get("id") not in state.finished
                ):
                    state.unfinished_statuses[str(job.get("status"))] += 1


async def stop_on_interrupt(
    scope: trio.CancelScope,
    state: LoadState,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """On Ctrl-C (SIGINT), stop sending and polling so the partial results get reported."""
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        task_status.started()
        async for _ in signals:
            state.interrupted = True
            scope.cancel()
            return


async def preflight(client: httpx.AsyncClient, url: str) -> None:
    try:
        response = await client.get("/healthz")
    except httpx.HTTPError as exc:
        raise LoadTestError(f"cannot reach the API at {url}: {exc or type(exc).__name__}") from None
    if response.status_code != 200:
        raise LoadTestError(f"{url}/healthz answered {response.status_code}; is this the API?")


async def load_test(state: LoadState) -> None:
    """Send, poll and wait; everything observed is recorded in ``state`` as it happens (so
    an interrupted run can still be summarised)."""
    options = state.options
    limits = httpx.Limits(
        max_connections=options.concurrency + 4,
        max_keepalive_connections=options.concurrency + 4,
    )
    headers = {"Authorization": f"Bearer {options.key}"} if options.key else None
    async with httpx.AsyncClient(
        base_url=options.url, limits=limits, timeout=REQUEST_TIMEOUT, headers=headers
    ) as client:
        try:
            with trio.fail_after(REQUEST_TIMEOUT + 1):
                await preflight(client, options.url)
        except trio.TooSlowError:
            raise LoadTestError(f"{options.url}/healthz did not answer in time") from None
        async with trio.open_nursery() as nursery:
            await nursery.start(stop_on_interrupt, nursery.cancel_scope, state)
            state.started = trio.current_time() + 0.01
            nursery.start_soon(report_progress, state)
            nursery.start_soon(poll, client, state)
            await send_all(client, state)
            with trio.move_on_after(options.timeout):
                await state.all_finished.wait()
            nursery.cancel_scope.cancel()
        if len(state.finished) < len(state.accepted) and not state.interrupted:
            with trio.move_on_after(REQUEST_TIMEOUT):
                await poll_round(client, state)  # one last look before giving up
            await describe_unfinished(client, state)
