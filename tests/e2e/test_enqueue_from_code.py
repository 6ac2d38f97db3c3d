"""Enqueue from code and schedules in code, as the README's "Run your own jobs" shows them:
its second block of commands and its Python snippet, run as pasted against a real ``dev``
(schedules sync twice, the management-command script, the FastAPI app), then the store
checked: the template is managed by code, the jobs enqueued from code completed."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from jobscheduler.config import ENVIRONMENT_VARIABLES
from jobscheduler.testing import free_port
from tests.support.docblocks import copy_of_the_repo, doc_blocks, run_strict_bash

pytestmark = pytest.mark.e2e

TIMEOUT = 120.0


async def test_enqueue_from_code_readme_commands_and_snippet_work_from_a_copy_of_the_repo(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    copy_of_the_repo(root)
    commands = doc_blocks("README.md", "sh", "Run your own jobs")[0]
    python_blocks = doc_blocks("README.md", "python", "Run your own jobs")
    [snippet] = [block for block in python_blocks if "send_email.enqueue(" in block]
    # The snippet runs as pasted once dev is up (right after the health wait).
    ready = "until curl -sf localhost:8080/healthz >/dev/null; do sleep 0.2; done\n"
    assert ready in commands
    commands = commands.replace(ready, ready + f"python3 - <<'PY'\n{snippet}PY\n", 1)
    api, web = free_port(), free_port()
    commands = commands.replace("localhost:8080", f"127.0.0.1:{api}").replace("8000", str(web))
    env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    env.pop("JOBSCHEDULER_TENANT", None)
    env.update(
        API_PORT=str(api),
        METRICS_PORT=str(free_port()),
        LOG_LEVEL="WARNING",
        JOBSCHEDULER_URL=f"http://127.0.0.1:{api}",
    )
    returncode, output = await run_strict_bash(
        commands, cwd=root, env=env, log_path=tmp_path / "readme.out", timeout=TIMEOUT
    )
    assert returncode == 0, f"README commands failed ({returncode}):\n{output}"
    # The commands' own output (dev's warnings on the shared terminal left out).
    lines = [line for line in output.splitlines() if not re.match(r"\d{4}-\d\d-\d\dT", line)]

    assert lines[0] == "completed"  # the Python snippet
    assert (
        "+ create    tenant-a/nightly-primes  count-primes '0 2 * * *' Europe/Paris  (dry run)"
        in lines
    )
    assert "+ create    tenant-a/nightly-primes  count-primes '0 2 * * *' Europe/Paris" in lines
    assert lines.count("no change: 1 schedule(s) of myjobs up to date") == 1
    assert any(line.endswith(": completed") for line in lines)  # send_welcome.py waited
    signup = json.loads(lines[-1])
    assert signup["status"] == "pending"
    outbox = [
        json.loads(line) for line in (root / "examples" / "outbox.jsonl").read_text().splitlines()
    ]
    assert {m["to"] for m in outbox} >= {"ada@example.com", "grace@example.com"}

    # The store: the template marked as managed by code.
    import sqlite3

    db = sqlite3.connect(root / "examples" / "data" / "jobscheduler.db")
    try:
        row = db.execute(
            "SELECT cron, managed_by, status FROM jobs WHERE idempotency_key = 'nightly-primes'"
        ).fetchone()
        signed_up = db.execute(
            "SELECT job_type FROM jobs WHERE idempotency_key = 'welcome-linus@example.com'"
        ).fetchone()
    finally:
        db.close()
    assert row == ("0 2 * * *", "myjobs", "pending")
    assert signed_up == ("send-email",)
