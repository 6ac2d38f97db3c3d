"""``jobscheduler loadtest``: drive a running stack over HTTP and measure it.

Open loop: ``POST /jobs`` goes out on a fixed timetable (``--rate`` per second for
``--duration``) whether or not earlier requests have been answered, with at most
``--concurrency`` requests in flight (when that bound is hit the timetable slips, and the
report shows by how much as "send lag"). Every job is due immediately, under a tenant unique
to this run, so polling ``GET /jobs?tenantId=<run tenant>&status=completed`` (and ``dlq``)
in rounds finds every finished job without one request per job.

What is measured:

- ack latency: the ``POST /jobs`` round trip of each accepted (201) job;
- end-to-end: the finished job's ``updatedAt`` (server clock) minus the moment the client
  sent the POST (client clock) -- exact on one machine, skewed by any clock difference
  between client and server hosts;
- start delay: ``claimedAt - scheduledAt`` (both server-side fields; ``scheduledAt`` is the
  send time, so this is how long a due job waited for the scheduler and an executor);
- throughput: completed jobs / (last completed ``updatedAt`` - first send).

Exit status 0 when at least one job was accepted and every accepted job finished
(``completed`` or ``dlq``) before ``--timeout`` ran out after the last send; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import signal
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import attrs
import httpx
import trio

from ..config import parse_duration
from ..errors import JobSchedulerError, ValidationError
from ..handlers import default_registry
from ..model import MAX_LIST_LIMIT, format_time, parse_time
from .stats import percentiles

EPILOG = """\
Examples:
  jobscheduler loadtest --rate 20 --duration 30s
  jobscheduler loadtest -url http://localhost:8080 -rate 100 -duration 10s -job-type log-message
  jobscheduler loadtest --job-type slow --payload '{"sleepMs": 200}' --concurrency 128

Progress goes to stderr once a second; the summary goes to stdout. End-to-end latency uses
the server's updatedAt against the client's send time, so run the load test on the same host
as the API (or with synchronised clocks).
"""

REQUEST_TIMEOUT = 10.0
POLL_INTERVAL = 1.0  # results use server timestamps, so polling faster only adds load
PROGRESS_INTERVAL = 1.0
FINAL_STATUSES = ("completed", "dlq")
PERCENTILES = (50.0, 95.0, 99.0)


def _duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than zero, got {text!r}")
    return seconds


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than zero, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than zero, got {text!r}")
    return value


def _payload(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    add = parser.add_argument
    add(
        "--url", "-url", default="http://localhost:8080", help="API base URL (default: %(default)s)"
    )
    add(
        "--rate",
        "-rate",
        type=_positive_float,
        default=20.0,
        metavar="PER_SECOND",
        help="POST /jobs per second (default: 20)",
    )
    add(
        "--duration",
        "-duration",
        type=_duration,
        default=30.0,
        metavar="DURATION",
        help="how long to send, e.g. 30s, 2m (default: 30s)",
    )
    add(
        "--job-type",
        "-job-type",
        default="noop",
        metavar="TYPE",
        help="jobType of every job (default: noop)",
    )
    add(
        "--payload",
        "-payload",
        type=_payload,
        default=None,
        metavar="JSON",
        help="payload of every job (default: {} -- log-message gets a message)",
    )
    add(
        "--tenant",
        "-tenant",
        default="loadtest",
        metavar="PREFIX",
        help="tenant prefix; the run's tenant is <PREFIX>-<run id> (default: loadtest)",
    )
    add(
        "--key",
        "-key",
        default=None,
        metavar="API_KEY",
        help="API key sent as 'Authorization: Bearer <key>' (needed with AUTH=required; an "
        "all-tenant admin key, or a writer key bound to the run's tenant)",
    )
    add(
        "--timeout",
        "-timeout",
        type=_duration,
        default=60.0,
        metavar="DURATION",
        help="after the last send, how long to wait for jobs to finish (default: 60s)",
    )
    add(
        "--concurrency",
        "-concurrency",
        type=_positive_int,
        default=64,
        metavar="N",
        help="most POSTs in flight at once (default: 64)",
    )


class LoadTestError(JobSchedulerError, RuntimeError):
    """The load test could not run at all (for example, the API is unreachable)."""


# --------------------------------------------------------------------------- state


@attrs.frozen(kw_only=True)
class Options:
    url: str
    rate: float
    duration: float
    job_type: str
    payload: dict[str, Any]
    tenant: str
    timeout: float
    concurrency: int
    key: str | None = None

    @property
    def total(self) -> int:
        """Jobs on the timetable: one every ``1/rate`` seconds for ``duration``."""
        return max(1, round(self.rate * self.duration))


@attrs.frozen(kw_only=True)
class Accepted:
    """One job the API acknowledged with 201."""

    index: int
    job_id: str
    tenant: str
    sent_at: datetime  # client wall clock just before the POST went out


@attrs.define
class LoadState:
    """What the senders and the poller have seen so far (one trio thread; no locks)."""

    options: Options
    run_id: str
    started: float = 0.0
    sent: int = 0
    in_flight: int = 0
    accepted: dict[str, Accepted] = attrs.field(factory=dict)
    errors: Counter[str] = attrs.field(factory=Counter)
    error_samples: dict[str, str] = attrs.field(factory=dict)
    ack_latencies: list[float] = attrs.field(factory=list)
    send_lags: list[float] = attrs.field(factory=list)
    finished: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    poll_errors: Counter[str] = attrs.field(factory=Counter)
    sending_done: bool = False
    interrupted: bool = False
    first_send_at: datetime | None = None
    unfinished_statuses: Counter[str] = attrs.field(factory=Counter)
    all_finished: trio.Event = attrs.field(factory=trio.Event)

    def tenant_for(self, index: int) -> str:
        """The run's tenant; runs of more than MAX_LIST_LIMIT jobs use one tenant per block
        of MAX_LIST_LIMIT, so one list request per status can always see a whole block."""
        base = f"{self.options.tenant}-{self.run_id}"
        if self.options.total <= MAX_LIST_LIMIT:
            return base
        return f"{base}-{index // MAX_LIST_LIMIT}"

    def tenant_label(self) -> str:
        base = f"{self.options.tenant}-{self.run_id}"
        return base if self.options.total <= MAX_LIST_LIMIT else f"{base}-<block>"

    def unfinished_tenants(self) -> list[str]:
        return sorted(
            {a.tenant for job_id, a in self.accepted.items() if job_id not in self.finished}
        )

    def record_error(self, key: str, detail: str) -> None:
        self.errors[key] += 1
        self.error_samples.setdefault(key, " ".join(detail.split())[:200])


def default_payload(job_type: str, run_id: str) -> dict[str, Any]:
    if job_type == "log-message":
        return {"message": f"loadtest {run_id}"}
    return {}


def check_payload(job_type: str, payload: dict[str, Any]) -> None:
    """Reject a payload the built-in validators would refuse, before sending thousands."""
    validators = default_registry().validators()
    validator = validators.get(job_type)
    if validator is not None:
        try:
            validator(payload)
        except ValidationError as exc:
            raise ValidationError(f"--payload for {job_type}: {exc}") from None


# --------------------------------------------------------------------------- phases


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


# --------------------------------------------------------------------------- report


def _ms_row(label: str, values: Sequence[float], note: str = "") -> str:
    if not values:
        return f"  {label:<22}{'-':>10}{'-':>10}{'-':>10}{'-':>10}  (no samples){note}"
    pct = percentiles(values, (*PERCENTILES, 100.0))
    cells = "".join(f"{pct[p] * 1000:>10.1f}" for p in (*PERCENTILES, 100.0))
    return f"  {label:<22}{cells}  n={len(values)}{note}"


def summarize(state: LoadState) -> tuple[str, bool]:
    """The operator's report and whether the run passed."""
    options = state.options
    completed = [job for job in state.finished.values() if job.get("status") == "completed"]
    dlq = len(state.finished) - len(completed)
    unfinished = len(state.accepted) - len(state.finished)

    end_to_end: list[float] = []
    start_delays: list[float] = []
    last_done: datetime | None = None
    for job in completed:
        accepted = state.accepted[job["id"]]
        try:
            updated = parse_time(job["updatedAt"], "updatedAt")
            end_to_end.append((updated - accepted.sent_at).total_seconds())
            last_done = updated if last_done is None else max(last_done, updated)
            if "claimedAt" in job:
                claimed = parse_time(job["claimedAt"], "claimedAt")
                scheduled = parse_time(job["scheduledAt"], "scheduledAt")
                start_delays.append((claimed - scheduled).total_seconds())
        except (KeyError, TypeError, ValidationError):
            continue
    throughput = 0.0
    if completed and last_done is not None and state.first_send_at is not None:
        window = (last_done - state.first_send_at).total_seconds()
        throughput = len(completed) / window if window > 0 else float("nan")

    passed = bool(state.accepted) and unfinished == 0
    lines = [
        f"loadtest {options.url}  job type {options.job_type}  tenant {state.tenant_label()}",
        f"  target {options.rate:g}/s for {options.duration:g}s = {options.total} jobs, "
        f"concurrency {options.concurrency}, timeout {options.timeout:g}s",
        "",
        f"  sent       {state.sent:>7}    accepted (201) {len(state.accepted):>7}"
        f"    errors {sum(state.errors.values()):>5}",
        f"  finished   {len(state.finished):>7}    completed      {len(completed):>7}"
        f"    dlq    {dlq:>5}    unfinished {unfinished}",
    ]
    for key, count in state.errors.most_common():
        lines.append(f"    error {key}: {count}  e.g. {state.error_samples.get(key, '')}")
    if state.unfinished_statuses:
        detail = ", ".join(f"{s} {n}" for s, n in state.unfinished_statuses.most_common())
        lines.append(f"    unfinished by last seen status: {detail}")
    if state.poll_errors:
        detail = ", ".join(f"{k} {n}" for k, n in state.poll_errors.most_common())
        lines.append(f"    poll errors (retried): {detail}")
    lines += [
        "",
        f"  {'latency (ms)':<22}{'p50':>10}{'p95':>10}{'p99':>10}{'max':>10}",
        _ms_row("ack (POST round trip)", state.ack_latencies),
        _ms_row("end-to-end", end_to_end),
        _ms_row("start delay", start_delays),
        _ms_row("send lag", state.send_lags),
        "",
        f"  throughput {throughput:.1f} completed/s",
        "",
        "  end-to-end = completed job's updatedAt (server clock) - POST send time (client clock)",
        "  start delay = claimedAt - scheduledAt (scheduledAt = send time)",
        "  send lag = how far behind the open-loop timetable each POST started",
        "  throughput = completed / (last completed updatedAt - first send)",
        "",
    ]
    if state.interrupted:
        passed = False
        lines.append("INTERRUPTED: partial results (jobs already sent keep running)")
    elif passed:
        lines.append(f"PASS: all {len(state.accepted)} accepted jobs finished")
    elif not state.accepted:
        lines.append("FAIL: no job was accepted")
    else:
        lines.append(
            f"FAIL: {unfinished} of {len(state.accepted)} accepted jobs did not finish "
            f"within {options.timeout:g}s after the last send"
        )
    return "\n".join(lines), passed


def run(args: argparse.Namespace) -> int:
    run_id = datetime.now(UTC).strftime("%Y%m%d%H%M%S") + "-" + secrets.token_hex(3)
    payload = args.payload if args.payload is not None else default_payload(args.job_type, run_id)
    check_payload(args.job_type, payload)
    options = Options(
        url=args.url.rstrip("/"),
        rate=args.rate,
        duration=args.duration,
        job_type=args.job_type,
        payload=payload,
        tenant=args.tenant,
        timeout=args.timeout,
        concurrency=args.concurrency,
        key=args.key,
    )
    print(
        f"loadtest: {options.total} {options.job_type} jobs at {options.rate:g}/s "
        f"to {options.url} (run {run_id})",
        file=sys.stderr,
    )
    state = LoadState(options=options, run_id=run_id)
    trio.run(load_test, state)
    text, passed = summarize(state)
    print(text)
    if state.interrupted:
        return 130
    return 0 if passed else 1
