"""The flow-control how-to (docs/how-to/flow-control.md) as a reader pastes it: its module
saved as ``flowjobs.py``, then its shell blocks in order against a real ``dev`` with
``AUTH=off`` (as ``just dev``), on the test's ports instead of 8080 and 9100."""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path

import pytest
import trio

from tests.support.dev_server import DevServer
from tests.support.docblocks import doc_blocks
from tests.support.processes import run_command

from .conftest import readme_env

pytestmark = pytest.mark.e2e

PAGE = "docs/how-to/flow-control.md"


def page_script(server: DevServer) -> str:
    commands = "\n".join(doc_blocks(PAGE, "sh"))
    commands = commands.replace("localhost:8080", f"127.0.0.1:{server.api_port}")
    commands = commands.replace("localhost:9100", f"127.0.0.1:{server.metrics_port}")
    return "set -euo pipefail\n" + commands


async def test_the_flow_control_page_runs_as_pasted(
    dev_factory: Callable[..., Awaitable[DevServer]], tmp_path: Path
) -> None:
    server = await dev_factory(AUTH="off")
    (module,) = doc_blocks(PAGE, "python")
    work = tmp_path / "reader"
    work.mkdir()
    (work / "flowjobs.py").write_text(module)
    (work / ".venv").symlink_to(Path(sys.prefix))  # what `. .venv/bin/activate` finds
    script = ["bash", "-c", page_script(server)]
    done = await trio.to_thread.run_sync(
        lambda: run_command(script, env=readme_env(server), timeout=240, cwd=work)
    )
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr}"
    # check: the limits declared in code
    assert re.search(
        r"^  sync-crm +run_in=trio concurrency=1 rateLimit=100/s burst=10$", out, re.M
    ), out
    assert re.search(r"^  send-sms +run_in=trio maxRunning=5 keyRateLimit=10/m$", out, re.M), out
    # one at a time per customer: one running, two pending, and the held job says why
    listed = [line.split() for line in out.splitlines() if " slow " in line]
    statuses = [row[3] for row in listed[-3:]]
    assert statuses.count("running") == 1, out
    assert "pending" in statuses, out
    assert '"held":"waiting: customer-42 has 1 of 1 running"' in out, out
    # two wait, or one if the first job ended meanwhile (a loaded machine)
    assert re.search(r"tenant-a\s+slow\s+[12]\s+waiting: customer-42 has 1 of 1 running", out), out
    assert re.search(r'scheduler_waiting_jobs\{reason="concurrency"\} [12]\.0', out), out
    # the rate: six starts, half a second apart at least (2/s, burst 1)
    starts = sorted(
        datetime.fromisoformat(line.replace("Z", "+00:00"))
        for line in out.splitlines()
        if re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", line)
    )
    assert len(starts) == 6, out
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= 0.45, gaps
    # the weight
    assert re.search(r"tenant-a\s+3", out), out
