"""A management command in the style of Django's: enqueue a job from a script and wait for it.

    python send_welcome.py ada@example.com --wait 30

Plain Python (no Django needed): the command enqueues a ``send-email`` job with
``send_email.enqueue(...)`` -- it returns once the job is stored -- then waits for its
outcome and exits 0 if it completed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys

from jobscheduler.errors import JobSchedulerError
from myjobs import send_email


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="send a welcome e-mail through the scheduler")
    parser.add_argument("email")
    parser.add_argument("--tenant", default="tenant-a")
    parser.add_argument("--wait", type=float, default=30.0, help="seconds to wait (30)")
    args = parser.parse_args(argv)
    try:
        job = send_email.enqueue(
            {"to": args.email, "subject": "Welcome", "body": "Hello from a script"},
            tenant_id=args.tenant,
        )
        print(f"enqueued {job['id']} ({job['status']})")
        done = send_email.wait(job, timeout=args.wait)
    except JobSchedulerError as exc:
        print(f"send_welcome: {exc}", file=sys.stderr)
        return 1
    print(f"{done['id']}: {done['status']}")
    return 0 if done["status"] == "completed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
