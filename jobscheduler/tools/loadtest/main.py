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

This module is the command (its options, the payload check, the run); the run's record is
:mod:`~jobscheduler.tools.loadtest.state`, the senders and the poller
:mod:`~jobscheduler.tools.loadtest.traffic`, the summary
:mod:`~jobscheduler.tools.loadtest.report`.
"""

from __future__ import annotations

import argparse
import math
import secrets
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import trio

from jobscheduler._argtypes import json_object
from jobscheduler.domain.durations import parse_duration
from jobscheduler.errors import ValidationError
from jobscheduler.handlers import default_registry

from .report import summarize
from .state import LoadState, Options
from .traffic import load_test

EPILOG = """\
Examples:
  jobscheduler loadtest --rate 20 --duration 30s
  jobscheduler loadtest -url http://localhost:8080 -rate 100 -duration 10s -job-type log-message
  jobscheduler loadtest --job-type slow --payload '{"sleepMs": 200}' --concurrency 128

Progress goes to stderr once a second; the summary goes to stdout. End-to-end latency uses
the server's updatedAt against the client's send time, so run the load test on the same host
as the API (or with synchronised clocks).
"""


def _duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than zero, got {text!r}")
    return seconds


_Number = TypeVar("_Number", int, float)


def _positive(convert: Callable[[str], _Number], what: str) -> Callable[[str], _Number]:
    """An argparse type: ``convert`` the text, which must then be finite and above zero."""

    def parse(text: str) -> _Number:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"must be greater than zero, got {text!r}")
        return value

    return parse


_positive_float = _positive(float, "a number")
_positive_int = _positive(int, "an integer")


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
        type=json_object,
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
