"""The report of ``jobscheduler loadtest``: counts, latency percentiles (ack, end-to-end,
start delay, send lag), throughput and the verdict, made from what the run recorded (the
measures are defined in :mod:`jobscheduler.tools.loadtest.main`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jobscheduler.domain.model import parse_time
from jobscheduler.errors import ValidationError
from jobscheduler.tools.stats import percentiles

from .state import LoadState

PERCENTILES = (50.0, 95.0, 99.0)


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
