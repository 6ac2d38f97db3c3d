"""The README's "Try it" and the tutorial's first steps (start it, a first job, a first cron
job, a first workflow), run as pasted.

Its "Run your own jobs" part is run by ``test_own_jobs`` and ``test_enqueue_from_code``. The
blocks run in a copy of the repository's layout, on free ports, with ``just dev`` as what its
recipe runs (``.venv/bin/jobscheduler dev``) so that the test needs no ``just`` and installs
nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobscheduler.config import ENVIRONMENT_VARIABLES
from jobscheduler.testing import free_port
from tests.support.docblocks import doc_blocks

pytestmark = pytest.mark.e2e

PAGE = "docs/tutorial/index.md"
SECTIONS = ("Start it", "Your first job", "Your first cron job", "Your first workflow")


def pasted(blocks: list[str], api: int) -> str:
    """The blocks as one script, on ``api``'s port, with ``just dev`` as its recipe's command."""
    assert blocks[0].startswith("just dev &\n")
    script = "\n".join(blocks).replace("just dev &", ".venv/bin/jobscheduler dev &", 1)
    return script.replace("localhost:8080", f"127.0.0.1:{api}")


def run_pasted(blocks: list[str], tmp_path: Path) -> str:
    """Run ``blocks`` from a copy of the repository's layout; their standard output."""
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    api = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    env.update(
        API_PORT=str(api),
        METRICS_PORT=str(free_port()),
        LOG_LEVEL="WARNING",
        JOBSCHEDULER_URL=f"http://127.0.0.1:{api}",
    )
    script = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT\n" + pasted(
        blocks, api
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert (tmp_path / "data" / "jobscheduler.db").exists()
    return done.stdout


def test_the_readmes_try_it_runs_as_pasted(tmp_path: Path) -> None:
    out = run_pasted(doc_blocks("README.md", "sh", "Try it"), tmp_path)
    created, listing = (json.loads(line) for line in out.splitlines()[:2])
    assert created["idempotencyKey"] == "hello-1"
    assert [job["status"] for job in listing] == ["completed"]
    assert out.splitlines()[-1].startswith("the dashboard: http://127.0.0.1:")


def test_the_tutorials_first_steps_run_as_pasted(tmp_path: Path) -> None:
    blocks = [block for section in SECTIONS for block in doc_blocks(PAGE, "sh", section)]
    assert len(blocks) == len(SECTIONS), "one block per first step"
    out = run_pasted(blocks, tmp_path)
    assert "the dashboard: http://127.0.0.1:" in out
    created, listing = (json.loads(line) for line in out.splitlines()[1:3])
    assert created["idempotencyKey"] == "hello-1"
    [job] = listing
    assert (job["status"], job["attempts"]) == ("completed", 1)
    assert "every-five-minutes" in out  # the template, created and listed
    assert out.count("T09:00:00+09:00") == 3, out  # the preview, read in Tokyo
    table = out[out.index("\nSTEP ") :].splitlines()[2:6]  # the workflow's steps, as waited for
    steps = {line.split()[0]: line.split()[1] for line in table}
    assert steps == dict.fromkeys(("fetch", "resize", "tag", "publish"), "completed"), out
