"""The commands of the tracing and failure-notification guides (docs/how-to/tracing.md,
docs/how-to/notifications.md), run as pasted from a copy of the repository against a real
``dev`` (on free ports): the console trace of one request shows its create, claim, attempt
and outcome in the request's trace; the webhook walk-through registers a webhook, a local
receiver checks the signed delivery of a dead letter, and the delivery log says it was
delivered."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from jobscheduler.config import ENVIRONMENT_VARIABLES
from jobscheduler.testing import free_port
from tests.support.docblocks import copy_of_the_repo, doc_blocks, run_strict_bash

pytestmark = pytest.mark.e2e

TIMEOUT = 90.0
TRACING = "docs/how-to/tracing.md"
NOTIFICATIONS = "docs/how-to/notifications.md"
TRACE_ID = "0x4bf92f3577b34da6a3ce929d0e0e4736"


def page_commands(page: str) -> str:
    """The one ``sh`` block of the guide ``page``."""
    [block] = doc_blocks(page, "sh")
    return block


async def run_pasted(tmp_path: Path, commands: str) -> tuple[Path, str]:
    """Run ``commands`` in a copy of the repository (examples/ and the virtualenv), with
    ``localhost:8080`` on a free port; the copy and what the commands printed."""
    root = tmp_path / "repo"
    copy_of_the_repo(root)
    api = free_port()
    commands = commands.replace("localhost:8080", f"127.0.0.1:{api}")
    env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    env.update(
        API_PORT=str(api),
        METRICS_PORT=str(free_port()),
        SQLITE_PATH=str(tmp_path / "jobs.db"),
        LOG_LEVEL="WARNING",
        JOBSCHEDULER_URL=f"http://127.0.0.1:{api}",
    )
    env.pop("JOBSCHEDULER_API_KEY", None)
    returncode, output = await run_strict_bash(
        commands, cwd=root, env=env, log_path=tmp_path / "readme.out", timeout=TIMEOUT
    )
    assert returncode == 0, f"the guide's commands failed ({returncode}):\n{output}"
    return root, output


async def test_the_tracing_walk_through_prints_one_request_trace(tmp_path: Path) -> None:
    _, output = await run_pasted(tmp_path, page_commands(TRACING))
    names = re.findall(
        r'"name": "([^"]+)",\n\s+"context": \{\n\s+"trace_id": "(0x[0-9a-f]+)"',
        (tmp_path / "repo" / "spans.txt").read_text(),
    )
    in_trace = {name for name, trace in names if trace == TRACE_ID}
    assert {"job.create /jobs", "job.claim", "job.attempt", "job.outcome"} <= in_trace, output
    assert f'"trace_id": "{TRACE_ID}"' in output
    assert "Traceback" not in output


async def test_the_webhook_walk_through_delivers_a_signed_dead_letter(tmp_path: Path) -> None:
    commands = page_commands(NOTIFICATIONS).replace("9001", str(free_port()))
    _, output = await run_pasted(tmp_path, commands)
    assert re.search(
        r"job\.dlq [0-9a-f]{24} 'HandlerError: flaky: simulated failure \(failRate=1\.0\)': "
        r"signature ok$",
        output,
        re.M,
    ), output
    assert "Traceback" not in output
    assert "refused" not in output
    table = output.strip().splitlines()[-2:]
    assert table[0].split()[:4] == ["ID", "EVENT", "STATUS", "ATTEMPTS"], output
    assert table[1].split()[1:3] == ["job.dlq", "delivered"], output
