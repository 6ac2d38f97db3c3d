"""An example jobscheduler app: your own job types, loaded with ``--app myjobs``.

Run it from this directory (see the tutorial, "Run your own jobs")::

    jobscheduler check --app myjobs
    jobscheduler dev --app myjobs

``registry`` is what ``--app myjobs`` loads (``--app myjobs:registry`` says so explicitly).
The built-in job types (noop, log-message, flaky, slow) stay available next to these.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from jobscheduler import PermanentError
from jobscheduler.handlers import HandlerRegistry, JobContext

registry = HandlerRegistry()

#: Where send-email "delivers": one JSON line per message (a stand-in for an SMTP server).
OUTBOX = Path(os.environ.get("OUTBOX", "outbox.jsonl"))

#: The payload of send-email as a JSON Schema: POST /jobs answers 400 when it does not match.
EMAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+$"},
        "subject": {"type": "string", "minLength": 1, "maxLength": 200},
        "body": {"type": "string", "maxLength": 10000},
    },
    "required": ["to", "subject"],
    "additionalProperties": False,
}


@registry.handler("send-email", validate=EMAIL_SCHEMA, timeout="30s", max_attempts=5)
async def send_email(ctx: JobContext) -> dict[str, Any]:
    """An I/O-bound handler: ``async def`` runs on trio and is cancelled at its timeout.

    Idempotent (delivery is at least once): a message already in the outbox for this job is
    not written again.
    """
    to = ctx.payload["to"]
    if to.endswith(".invalid"):
        # No retry can fix this address: skip the remaining attempts, straight to the DLQ.
        raise PermanentError(f"undeliverable address {to!r}")
    line = json.dumps(
        {
            "jobId": ctx.job_id,
            "to": to,
            "subject": ctx.payload["subject"],
            "body": ctx.payload.get("body", ""),
        }
    )
    await trio.to_thread.run_sync(_append_once, OUTBOX, ctx.job_id, line)
    ctx.logger.info("e-mail sent to %s (attempt %d/%d)", to, ctx.attempt, ctx.max_attempts)
    return {"deliveredTo": to}


def _append_once(path: Path, job_id: str, line: str) -> None:
    if path.exists() and f'"jobId": "{job_id}"' in path.read_text():
        return
    with path.open("a") as outbox:
        outbox.write(line + "\n")


def validate_primes(payload: Mapping[str, Any]) -> None:
    """A validator can also be a function raising ValidationError (a 400 at POST /jobs)."""
    from jobscheduler.errors import ValidationError

    below = payload.get("below")
    if isinstance(below, bool) or not isinstance(below, int) or not 2 <= below <= 50_000_000:
        raise ValidationError("payload.below: an integer between 2 and 50000000")
    report = payload.get("report")
    if report is not None and not isinstance(report, str):
        raise ValidationError("payload.report: an e-mail address to send the count to")


@registry.schedule("nightly-primes", cron="0 2 * * *", timezone="Europe/Paris",
                   payload={"below": 100000}, tenant_id="tenant-a")
@registry.handler("count-primes", validate=validate_primes, timeout="20s")
def count_primes(ctx: JobContext) -> dict[str, int]:
    """A CPU-bound handler: plain ``def`` runs in a worker process, which is killed if it
    runs past its timeout (or on shutdown). Its return value is the job's result."""
    below = int(ctx.payload["below"])
    sieve = bytearray([1]) * below
    sieve[0:2] = b"\x00\x00"
    for n in range(2, math.isqrt(below - 1) + 1):
        if sieve[n]:
            sieve[n * n :: n] = bytes(len(range(n * n, below, n)))
    primes = sum(sieve)
    if ctx.payload.get("report"):
        # A handler can enqueue jobs too: through its executor, in this job's tenant, with a
        # key derived from this job, so a retried attempt does not send the report twice.
        ctx.enqueue(
            "send-email",
            {"to": ctx.payload["report"], "subject": f"{primes} primes below {below}"},
            name="report",
        )
    return {"below": below, "primes": primes}
