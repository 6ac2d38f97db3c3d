"""The operator tools as an operator runs them: ``python -m jobscheduler seed|loadtest``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from jobscheduler.cli.seed import TENANTS, kind_counts
from jobscheduler.domain.model import Job
from jobscheduler.store.sqlite import SQLiteJobStore
from jobscheduler.testing import free_port
from tests.support.dev_server import DevServer

Factory = Callable[..., Awaitable[DevServer]]
TOOL_TIMEOUT = 90.0


async def run_tool(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``python -m jobscheduler <args>``, bounded in time, output captured."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("MONGO_URI", None)  # the seed default must pick SQLite here
    with trio.fail_after(TOOL_TIMEOUT):
        return await trio.run_process(
            [sys.executable, "-m", "jobscheduler", *args],
            env=full_env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def stored_jobs(path: Path) -> list[Job]:
    store = SQLiteJobStore(path)
    await store.start()
    try:
        jobs: list[Job] = []
        for tenant in TENANTS:
            jobs += await store.list_jobs(tenant, None, 5000)
        return jobs
    finally:
        await store.close()


def kind_of(job: Job) -> str:
    """The seed kind of a stored job, recovered from what the store holds."""
    if job.cron is not None:
        return "cron"
    if job.job_type == "noop":
        return "future" if job.scheduled_at > job.created_at else "immediate"
    return job.job_type


def printed_tenant_counts(stdout: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^\s+(tenant-\w)\s+(\d+)$", stdout, re.M)}


# --------------------------------------------------------------------------- seed


@pytest.mark.e2e
async def test_seed_writes_the_documented_mix_and_can_run_twice(tmp_path: Path) -> None:
    db = tmp_path / "seed.db"
    env = {"SQLITE_PATH": str(db)}
    first = await run_tool("seed", "--count", "60", "--random-seed", "7", env=env)
    assert first.returncode == 0, first.stderr.decode()
    out = first.stdout.decode()
    assert f"sqlite {db}" in out

    jobs = await stored_jobs(db)
    expected = {**kind_counts(60), "cron": 3}
    assert expected == {"immediate": 24, "future": 15, "flaky": 9, "slow": 6,
                        "log-message": 6, "cron": 3}  # fmt: skip
    assert Counter(kind_of(job) for job in jobs) == expected
    by_tenant = Counter(job.tenant_id for job in jobs)
    assert set(by_tenant) == set(TENANTS)
    assert printed_tenant_counts(out) == dict(by_tenant)
    assert len({job.idempotency_key for job in jobs}) == 63

    for job in jobs:
        if job.job_type == "flaky":
            assert 0.3 <= job.payload["failRate"] <= 1.0
        if job.job_type == "slow":
            assert 50 <= job.payload["sleepMs"] <= 3000
        if job.job_type == "log-message":
            assert job.payload["message"]
    crons = {job.cron for job in jobs if job.cron is not None}
    assert {"*/1 * * * *", "*/5 * * * *", "0 2 * * *"} == crons

    # Same random seed, Go-style flag spelling: a second batch with fresh keys and the
    # same mix per tenant.
    second = await run_tool("seed", "-count", "60", "-random-seed", "7", env=env)
    assert second.returncode == 0, second.stderr.decode()
    assert printed_tenant_counts(second.stdout.decode()) == dict(by_tenant)
    again = await stored_jobs(db)
    assert len(again) == 126
    assert Counter(kind_of(job) for job in again) == {k: 2 * n for k, n in expected.items()}


# --------------------------------------------------------------------------- loadtest


@pytest.mark.e2e
async def test_loadtest_reports_percentiles_and_passes_against_dev(dev_factory: Factory) -> None:
    server = await dev_factory(LOG_LEVEL="INFO")
    result = await run_tool(
        "loadtest", "--url", server.url, "-rate", "20", "-duration", "3s", "--timeout", "30s",
        "--key", str(server.key),
    )  # fmt: skip
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, out + err
    assert re.search(r"sent\s+60\s+accepted \(201\)\s+60\s+errors\s+0", out), out
    assert re.search(r"completed\s+60\b", out), out
    for row in ("ack (POST round trip)", "end-to-end", "start delay"):
        line = next(line for line in out.splitlines() if line.strip().startswith(row))
        p50, p95, p99, high = (float(v) for v in line.split()[-5:-1])
        assert 0 <= p50 <= p95 <= p99 <= high, line
    assert "completed/s" in out
    assert "PASS: all 60 accepted jobs finished" in out
    assert re.search(r"\[\s*1\.0s\] sending: sent \d+/60", err), err


@pytest.mark.e2e
async def test_loadtest_exits_1_when_jobs_do_not_finish_in_time(dev_factory: Factory) -> None:
    server = await dev_factory(LOG_LEVEL="INFO")
    # failRate 1 retries with 2s and 4s backoff before the DLQ: longer than the 1s timeout.
    result = await run_tool(
        "loadtest", "--url", server.url, "--rate", "10", "--duration", "1s",
        "--job-type", "flaky", "--payload", '{"failRate": 1}', "--timeout", "1s",
        "--key", str(server.key),
    )  # fmt: skip
    out = result.stdout.decode()
    assert result.returncode == 1, out + result.stderr.decode()
    assert "FAIL: 10 of 10 accepted jobs did not finish within 1s" in out
    assert "unfinished by last seen status: pending 10" in out


@pytest.mark.e2e
async def test_loadtest_exits_1_when_the_api_is_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = await run_tool("loadtest", "--url", url, "-duration", "1s")
    assert result.returncode == 1
    assert f"cannot reach the API at {url}" in result.stderr.decode()


@pytest.mark.e2e
async def test_bench_create_phase_prints_the_ratio_to_the_echo_route_and_the_cost_of_auth() -> None:
    """``jobscheduler bench --phases create,burst`` in miniature: one command starts the echo
    route and a ``dev`` with each AUTH, and prints every figure the README reports; the
    burst after it measures the stack without the create phase's servers (gone by then)."""
    result = await run_tool(
        "bench",
        "--phases",
        "create,burst",
        "--burst",
        "50",
        "--create-requests",
        "40",
        "--create-rounds",
        "1",
    )
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    assert re.search(r"idle RSS of dev: [\d.]+ MB \(target <= 150 MB\)", out), out
    for label in ("echo route (the floor)", "POST /jobs AUTH=off", "POST /jobs AUTH=required"):
        assert re.search(
            rf"{re.escape(label)}: \d+ req/s .* p50 .* p99 .* server CPU \d+ us/request", out
        ), out
    assert re.search(r"create rate / echo rate: \d+% .*target >= 80%", out), out
    assert re.search(r"cost of auth .* p50 .* -> .* p99 .* -> ", out), out
    assert re.search(r"burst: 50 jobs accepted", out), out


@pytest.mark.e2e
async def test_bench_steady_timer_and_enqueue_phases_print_their_figures_with_auth() -> None:
    """``jobscheduler bench --auth required --phases steady,timer,enqueue`` in miniature:
    the requests carry the admin key the bench put in the fresh store, and each phase
    prints its figures in the format the README quotes."""
    result = await run_tool(
        "bench", "--auth", "required", "--phases", "steady,timer,enqueue",
        "--rate", "20", "--duration", "1s", "--concurrency", "4",
        "--enqueue", "100", "--batch-size", "50", "--enqueue-single", "20",
    )  # fmt: skip
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    pcts = r"p50 \S+, p95 \S+, p99 \S+, max \S+"
    expected = [
        r"auth: required",
        r"steady: 20 jobs at 20/s for 1s, each due 1s after creation \(\d+ sends >50ms behind",
        rf"  start delay \(claimedAt - scheduledAt\), target p99 <= 50ms: {pcts} \(n=20\)",
        rf"  POST /jobs latency at 20 req/s, target p99 <= 20ms: {pcts} \(n=20\)",
        r"timer: 200 jobs at 20/s, each due 1s after creation",
        rf"  start delay \(claimedAt - scheduledAt\), target p99 <= 10ms: {pcts} \(n=200\)",
        r"enqueue\+drain batch: 100 noop jobs via 2 x POST /jobs/batch \(50 each, 4 at once\)"
        r": sent in [\d.]+s .* = \d+ jobs/s \(target >= 2500\) \(load average [\d.]+, CPU of "
        r"the stack \d+ us per job\)",
        r"enqueue\+drain single: 20 noop jobs via POST /jobs x 20 \(4 connections\)",
        r"  bulk vs single enqueue\+drain: [\d.]+x",
        r"RSS of dev after load: [\d.]+ MB",
    ]
    for pattern in expected:
        assert re.search(f"^{pattern}", out, re.M), (pattern, out)


@pytest.mark.e2e
async def test_bench_fairness_phase_prints_bs_delays_and_the_drain_with_and_without() -> None:
    """``jobscheduler bench --phases fairness`` in miniature: a fresh ``dev`` with flow
    control on and one with it off, each draining tenant A's backlog and B's 20 jobs."""
    result = await run_tool("bench", "--phases", "fairness", "--fair-backlog", "200")
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    pcts = r"p50 \S+, p95 \S+, p99 \S+, max \S+ \(n=20\)"
    for flow in ("on", "off"):
        assert re.search(
            rf"^fairness, FLOW_CONTROL {flow}: A's 200 jobs \+ B's 20 drained at \d+ jobs/s, "
            r"CPU \d+ ms per 1,000 jobs \([\d.]+ cores; load average [\d.]+\)$",
            out,
            re.M,
        ), out
    assert re.search(rf"^  B's start delay \(startedAt - scheduledAt\), .*: {pcts}$", out, re.M)
    assert re.search(
        r"^fairness: drain with flow control / without = [\d.]+ \(target >= 0.9\); "
        r"CPU per job [\d.]+x$",
        out,
        re.M,
    ), out


@pytest.mark.e2e
async def test_bench_keyed_phase_runs_pairs_in_alternating_order_and_prints_their_median() -> None:
    """``jobscheduler bench --phases keyed --keyed-runs 2``: a limited drain (with how long
    a key's next job started after the one before), then an unlimited one; then the other
    way round; each pair's ratio, and the median."""
    result = await run_tool("bench", "--phases", "keyed", "--keyed-runs", "2")
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    lines = [line for line in out.splitlines() if line.startswith("keyed: ")]
    limited = (
        r"keyed: 1000 jobs over 50 keys, concurrency 1 per key: \d+ jobs/s; "
        r"attempts overlapping another of their key: 0 \(of 1000; target 0\)"
    )
    gap = (
        r"keyed: a key's next attempt started [\d.]+ ms after the one before it finished \(median\)"
    )
    free = r"keyed: without a limit \d+ jobs/s"
    ratio = r"keyed: with / without = [\d.]+ \(target >= 0.8; load average [\d.]+\)"
    median = r"keyed: median ratio [\d.]+ \([\d.]+, [\d.]+\)"
    expected = [limited, gap, free, ratio, free, limited, gap, ratio, median]
    assert len(lines) == len(expected), out
    for line, pattern in zip(lines, expected, strict=True):
        assert re.fullmatch(pattern, line), (line, out)


@pytest.mark.e2e
async def test_bench_keyed_phase_with_sleeping_jobs_runs_the_builtin_slow() -> None:
    """``--keyed-sleep-ms 20``: the same pair of drains, of ``slow`` jobs sleeping 20 ms,
    the limited one still with no two jobs of a key at once."""
    result = await run_tool("bench", "--phases", "keyed", "--keyed-sleep-ms", "20")
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    lines = [line for line in out.splitlines() if line.startswith("keyed: ")]
    assert re.fullmatch(
        r"keyed: 1000 slow jobs of 20 ms over 50 keys, concurrency 1 per key: \d+ jobs/s; "
        r"attempts overlapping another of their key: 0 \(of 1000; target 0\)",
        lines[0],
    ), out
    assert re.fullmatch(r"keyed: without a limit \d+ jobs/s", lines[2]), out


@pytest.mark.e2e
async def test_bench_refuses_sleeping_keyed_jobs_on_the_distributed_stack() -> None:
    """Its executor runs ``noop`` only: refused before anything starts."""
    result = await run_tool(
        "bench", "--stack", "distributed", "--phases", "keyed", "--keyed-sleep-ms", "20"
    )
    assert result.returncode == 2
    assert b"--keyed-sleep-ms needs the embedded stack" in result.stderr
    assert result.stdout == b""
