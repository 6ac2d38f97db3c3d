"""The load test's record and report, without a server: what ``summarize`` prints and
decides from a run's recorded state."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from jobscheduler.domain.model import MAX_LIST_LIMIT, format_time
from jobscheduler.tools.loadtest.report import summarize
from jobscheduler.tools.loadtest.state import Accepted, LoadState, Options

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def options(**changes: Any) -> Options:
    values: dict[str, Any] = {
        "url": "http://api",
        "rate": 10.0,
        "duration": 1.0,
        "job_type": "noop",
        "payload": {},
        "tenant": "lt",
        "timeout": 5.0,
        "concurrency": 4,
    }
    return Options(**{**values, **changes})


def accept(state: LoadState, index: int, sent: datetime) -> str:
    job_id = f"j-{index}"
    state.accepted[job_id] = Accepted(
        index=index, job_id=job_id, tenant=state.tenant_for(index), sent_at=sent
    )
    state.first_send_at = state.first_send_at or sent
    state.sent += 1
    return job_id


def finish(state: LoadState, job_id: str, status: str, claimed: float, updated: float) -> None:
    sent = state.accepted[job_id].sent_at
    state.finished[job_id] = {
        "id": job_id,
        "status": status,
        "scheduledAt": format_time(sent),
        "claimedAt": format_time(sent + timedelta(seconds=claimed)),
        "updatedAt": format_time(sent + timedelta(seconds=updated)),
    }


def row(text: str, label: str) -> list[float]:
    """The p50, p95, p99 and max cells (ms) of one latency row."""
    line = next(line for line in text.splitlines() if line.strip().startswith(label))
    return [float(cell) for cell in line.split()[-5:-1]]


def test_a_run_whose_accepted_jobs_all_finished_passes_with_its_latencies_and_throughput() -> None:
    state = LoadState(options=options(), run_id="r1")
    first = accept(state, 0, T0)
    second = accept(state, 1, T0 + timedelta(seconds=1))
    dead = accept(state, 2, T0 + timedelta(seconds=1))
    finish(state, first, "completed", claimed=0.010, updated=0.5)
    finish(state, second, "completed", claimed=0.030, updated=1.0)  # last done at T0 + 2s
    finish(state, dead, "dlq", claimed=0.0, updated=0.1)
    state.ack_latencies += [0.002, 0.004]

    text, passed = summarize(state)

    assert passed
    assert "PASS: all 3 accepted jobs finished" in text
    assert text.splitlines()[0].endswith("tenant lt-r1")
    assert re.search(r"completed\s+2\s+dlq\s+1\s+unfinished 0", text), text
    assert row(text, "end-to-end") == [750.0, 975.0, 995.0, 1000.0]
    assert row(text, "start delay")[3] == 30.0  # the dlq job's delay is not counted
    assert "throughput 1.0 completed/s" in text  # 2 completed over 2 s from the first send


def test_unfinished_jobs_fail_the_run_with_their_last_seen_status_and_the_timeout() -> None:
    state = LoadState(options=options(timeout=1.0), run_id="r2")
    done = accept(state, 0, T0)
    accept(state, 1, T0)
    finish(state, done, "completed", claimed=0.0, updated=0.1)
    state.unfinished_statuses["pending"] += 1
    state.record_error("HTTP 503", "busy\n  try   later")

    text, passed = summarize(state)

    assert not passed
    assert "FAIL: 1 of 2 accepted jobs did not finish within 1s after the last send" in text
    assert "unfinished by last seen status: pending 1" in text
    assert "error HTTP 503: 1  e.g. busy try later" in text


def test_a_run_with_nothing_accepted_fails_and_an_interrupted_one_says_so() -> None:
    nothing = LoadState(options=options(), run_id="r3")
    text, passed = summarize(nothing)
    assert not passed
    assert "FAIL: no job was accepted" in text
    assert "(no samples)" in text

    interrupted = LoadState(options=options(), run_id="r4", interrupted=True)
    finish_id = accept(interrupted, 0, T0)
    finish(interrupted, finish_id, "completed", claimed=0.0, updated=0.1)
    text, passed = summarize(interrupted)
    assert not passed
    assert "INTERRUPTED: partial results" in text


def test_a_run_larger_than_one_list_page_uses_one_tenant_per_block_of_jobs() -> None:
    small = LoadState(options=options(rate=MAX_LIST_LIMIT, duration=1.0), run_id="r5")
    assert small.tenant_for(MAX_LIST_LIMIT - 1) == "lt-r5"
    large = LoadState(options=options(rate=MAX_LIST_LIMIT + 1, duration=1.0), run_id="r6")
    assert large.tenant_for(0) == "lt-r6-0"
    assert large.tenant_for(MAX_LIST_LIMIT) == "lt-r6-1"
    assert large.tenant_label() == "lt-r6-<block>"
