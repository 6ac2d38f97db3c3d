"""The how-to page on retention (docs/how-to/retention.md), its blocks run as a reader pastes
them against a real ``jobscheduler dev`` (``AUTH=off``, as ``just dev`` runs): the rules in
force, the defaults set by environment, a handler's ``retention=``, a tenant's override over
the API and the command line, an export and its resumption, and the archive the reaper
writes before it deletes.

The blocks that start ``just dev`` are run as the variables they set, given to the test's
own ``dev`` (on free ports); ``localhost:8080`` becomes that server's address.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from jobscheduler.config import ENVIRONMENT_VARIABLES
from jobscheduler.domain.model import format_time
from tests.support.dev_server import DevServer
from tests.support.docblocks import doc_blocks
from tests.support.jobs_api import create_job, wait_for_job
from tests.support.processes import CompletedCli, run_command

pytestmark = pytest.mark.e2e

PAGE = "docs/how-to/retention.md"
Factory = Callable[..., Awaitable[DevServer]]


def blocks(section: str, language: str = "sh") -> list[str]:
    found = doc_blocks(PAGE, language, section)
    assert found, f"no {language} block under {section!r}"
    return found


def dev_variables(block: str) -> dict[str, str]:
    """``A=1 B=2 just dev`` -> ``{"A": "1", "B": "2"}``."""
    *assignments, just, dev = shlex.split(block.strip())
    assert (just, dev) == ("just", "dev"), block
    return dict(a.split("=", 1) for a in assignments)


async def run_block(block: str, server: DevServer, cwd: Path, **env: str) -> CompletedCli:
    """``block`` in bash (stopping at the first failure) in ``cwd``, where ``.venv`` is this
    interpreter's, as a reader with ``just dev`` running would."""
    venv = cwd / ".venv"
    if not venv.exists():
        venv.symlink_to(Path(sys.prefix))
    address = server.url.removeprefix("http://")
    script = "set -euo pipefail\n" + block.replace("localhost:8080", address)
    clean = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    done = await trio.to_thread.run_sync(
        lambda: run_command(
            ["bash", "-c", script],
            env={**clean, "JOBSCHEDULER_URL": server.url, **env},
            timeout=120,
            cwd=cwd,
        )
    )
    assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr}"
    return done


def json_values(text: str) -> list[Any]:
    """The JSON values ``curl -s`` printed one after the other (no newline between)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while at < len(text.rstrip()):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return values


async def noop_jobs(
    http: httpx.AsyncClient, server: DevServer, tenant: str, count: int
) -> list[str]:
    """The ids of ``count`` new noop jobs of ``tenant``, due now."""
    ids = []
    for n in range(count):
        body = {
            "idempotencyKey": f"docs-{n}",
            "tenantId": tenant,
            "jobType": "noop",
            "scheduledAt": format_time(datetime.now(UTC)),
        }
        ids.append((await create_job(http, server, body))["id"])
    return ids


async def test_the_defaults_are_set_by_the_environment_and_shown(
    dev_factory: Factory, tmp_path: Path
) -> None:
    (start,) = blocks("Change the defaults per status")
    variables = dev_variables(start)
    server = await dev_factory(AUTH="off", **variables)
    (show,) = blocks("What is kept, and for how long")
    rules = json.loads((await run_block(show, server, tmp_path)).stdout)
    assert rules["defaults"] == {"cancelled": "3d", "completed": "1d", "dlq": "90d"}
    assert rules["overrides"] == []


def test_a_handlers_retention_is_listed_by_check(tmp_path: Path) -> None:
    (app,) = blocks("Per job type: the handler's `retention=`", "python")
    (tmp_path / "reports.py").write_text(app)
    clean = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
    done = run_command(
        [sys.executable, "-m", "jobscheduler", "check", "--app", "reports"], env=clean, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert re.search(
        r"^  send-report +run_in=trio retention=completed:1h,dlq:90d$", done.stdout, re.M
    )


async def test_a_tenants_override_over_the_api_and_the_command_line(
    dev_factory: Factory, tmp_path: Path
) -> None:
    server = await dev_factory(AUTH="off")
    over_http, on_the_store = blocks("Per tenant: an admin's override")
    stored, listed, cleared = json_values((await run_block(over_http, server, tmp_path)).stdout)
    assert stored["retention"] == {"completed": "1d", "dlq": "90d"}
    assert [o["name"] for o in listed["overrides"]] == ["acme"]
    assert cleared["overrides"] == []
    done = await run_block(on_the_store, server, tmp_path, SQLITE_PATH=str(server.db_path))
    assert "tenant    acme: completed=1d dlq=90d" in done.stdout
    assert "retention override" not in done.stderr
    async with httpx.AsyncClient() as http:
        rules = (await http.get(f"{server.url}/retention")).json()
    assert rules["overrides"] == []  # cleared again by the last command


async def test_an_export_and_its_resumption_write_every_job_once(
    dev_factory: Factory, tmp_path: Path
) -> None:
    server = await dev_factory(AUTH="off")
    async with httpx.AsyncClient(timeout=10.0) as http:
        ids = await noop_jobs(http, server, "acme", 5)
        for job_id in ids:
            await wait_for_job(http, server, job_id, lambda job: job["status"] == "completed")
    await trio.sleep(1.1)  # --finished-before "$(date ...)" is a whole second
    export, resume = blocks("Export jobs before they are pruned")
    done = await run_block(export, server, tmp_path)
    output = tmp_path / "acme-completed.jsonl"
    assert sorted(json.loads(line)["id"] for line in output.read_text().splitlines()) == sorted(ids)
    assert done.stdout.split()[0] == "5"  # wc -l
    assert not (tmp_path / "acme-completed.jsonl.cursor").exists()  # complete: no cursor left
    await run_block(resume, server, tmp_path)  # nothing to resume: does nothing
    assert len(output.read_text().splitlines()) == 5
    # An export cut off after its first page of two: its file and its cursor, as left.
    first = await run_block(
        export.replace("-o acme-completed.jsonl", "--page-size 2"), server, tmp_path
    )
    cursor = re.findall(r"^cursor: (\S+)$", first.stderr, re.M)[0]
    output.write_text("".join(line + "\n" for line in first.stdout.splitlines()[:2]))
    (tmp_path / "acme-completed.jsonl.cursor").write_text(cursor + "\n")
    await run_block(resume, server, tmp_path)
    resumed = [json.loads(line)["id"] for line in output.read_text().splitlines()]
    assert sorted(resumed) == sorted(ids)


async def test_the_reaper_archives_what_it_prunes_per_tenant_and_day(
    dev_factory: Factory, tmp_path: Path
) -> None:
    (start,) = blocks("Archive what the reaper deletes")[:1]
    archive = tmp_path / dev_variables(start)["ARCHIVE_DIR"]
    server = await dev_factory(
        AUTH="off", ARCHIVE_DIR=str(archive), RETENTION_COMPLETED="1s", REAPER_INTERVAL="1s"
    )
    async with httpx.AsyncClient(timeout=10.0) as http:
        ids = await noop_jobs(http, server, "acme", 3)
        with trio.fail_after(30):  # run, then pruned a second later
            for job_id in ids:
                while (await http.get(f"{server.url}/jobs/{job_id}")).status_code != 404:
                    await trio.sleep(0.2)
    (read,) = blocks("Archive what the reaper deletes")[1:]
    done = await run_block(read, server, tmp_path)
    listed, *lines = done.stdout.splitlines()
    assert listed == "acme"
    jobs: list[dict[str, Any]] = [json.loads(line) for line in lines]
    assert {job["id"] for job in jobs} == set(ids)
    assert all(job["status"] == "completed" and job["finishedAt"] for job in jobs)
    # Each with the record of the attempt that completed it.
    assert all([a["outcome"] for a in job["attempts"]] == ["completed"] for job in jobs)
