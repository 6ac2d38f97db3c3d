"""The how-to page on workflows (docs/how-to/workflows.md), its blocks run as pasted against a
live ``jobscheduler dev`` (authentication off, as ``just dev`` runs) loaded with the page's own
app: the shell blocks (``curl`` and the CLI) in order, then the Python client's block; then
what they did is checked through the API, not only their output."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.support.apps import write_app
from tests.support.dev_server import DevServer
from tests.support.docblocks import doc_blocks
from tests.support.processes import run_command

from .conftest import readme_env
from .dashboard_steps import DevFactory

pytestmark = pytest.mark.e2e

PAGE = "docs/how-to/workflows.md"


def pasted(block: str, server: DevServer) -> str:
    """``block`` as run here: the server's address instead of ``localhost:8080``."""
    return block.replace("localhost:8080", server.url.removeprefix("http://"))


async def run(argv: list[str], server: DevServer, cwd: Path) -> str:
    done = await trio.to_thread.run_sync(
        lambda: run_command(argv, env=readme_env(server), timeout=120, cwd=cwd)
    )
    assert done.returncode == 0, f"{argv[-1][:2000]}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def last_json(output: str) -> Any:
    """The last of the JSON values ``output`` holds back to back (curl adds no newline)."""
    decoder, at, value = json.JSONDecoder(), 0, None
    while at < len(output.rstrip()):
        value, at = decoder.raw_decode(output, at)
        at += len(output[at:]) - len(output[at:].lstrip())
    return value


async def workflow(http: httpx.AsyncClient, server: DevServer, key: str) -> dict[str, Any]:
    """The tenant-a workflow of ``key``, with its steps and each step's job."""
    listed = await http.get(
        f"{server.url}/workflows", params={"tenantId": "tenant-a", "idempotencyKeyPrefix": key}
    )
    [summary] = [w for w in listed.json() if w["idempotencyKey"] == key]
    found: dict[str, Any] = (await http.get(f"{server.url}/workflows/{summary['id']}")).json()
    for step in found["steps"]:
        step["job"] = (await http.get(f"{server.url}/jobs/{step['jobId']}")).json()
    return found


async def test_the_workflows_page_works_as_pasted(
    dev_factory: DevFactory, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    client_block, app = doc_blocks(PAGE, "python")
    assert "registry = HandlerRegistry()" in app
    server = await dev_factory(
        AUTH="off", JOBSCHEDULER_APP="wfjobs", **write_app(tmp_path / "app", "wfjobs", app)
    )
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # what `. .venv/bin/activate` finds
    shell = doc_blocks(PAGE, "sh")
    assert len(shell) == 7
    outputs = []
    for block in shell:
        script = "set -euo pipefail\n" + pasted(block, server)
        outputs.append(await run(["bash", "-c", script], server, tmp_path))
    printed = await run([sys.executable, "-c", client_block], server, tmp_path)

    # curl: the ETL ran every step after its parents, to completion.
    etl = await workflow(client, server, "etl-2026-12-01")
    assert etl["status"] == "completed"
    assert [s["name"] for s in etl["steps"]] == [
        "export", "transform-orders", "transform-customers", "load",
    ]  # fmt: skip
    assert '"idempotencyKey":"etl-2026-12-01"' in outputs[1]
    # The CLI: created, waited for, listed.
    assert "nightly-2026-12-01" in outputs[2]
    assert (await workflow(client, server, "nightly-2026-12-01"))["status"] == "completed"
    # ctx.parents: the transform read what the export returned.
    edges = {s["name"]: s["job"] for s in (await workflow(client, server, "edges-1"))["steps"]}
    assert edges["transform"]["result"] == {"rows": 21, "doubled": 42}
    # ctx.spawn_many and afterChildrenOf: three children, then the report of them all.
    billing = await workflow(client, server, "billing-2026-12")
    assert billing["status"] == "completed"
    by_name = {s["name"]: s["job"] for s in billing["steps"]}
    assert sorted(by_name) == [
        "charge-all", "charge-all/customer-7", "charge-all/customer-8",
        "charge-all/customer-9", "report",
    ]  # fmt: skip
    assert by_name["report"]["result"] == {"charged": [7, 8, 9]}
    # Failure: the dead-lettered audit cancelled the archive; the clean-up ran anyway; the
    # retry ran the audit again.
    assert "dlq" in outputs[5]
    assert "cancelled" in outputs[5]
    fails = {s["name"]: s["job"] for s in (await workflow(client, server, "fails-1"))["steps"]}
    assert fails["clean-up"]["status"] == "completed"
    with trio.fail_after(30):
        while True:
            url = f"{server.url}/jobs/{fails['audit']['id']}/attempts"
            if len((await client.get(url)).json()["attempts"]) == 2:
                break
            await trio.sleep(0.1)
    # start-workflow: the template's triggered run started one workflow, linked to it.
    [started] = last_json(outputs[6])
    assert started["templateId"]
    assert started["fireAt"]
    with trio.fail_after(30):
        while (found := await workflow(client, server, started["idempotencyKey"]))[
            "status"
        ] != "completed":
            await trio.sleep(0.1)
    assert [s["name"] for s in found["steps"]] == ["export", "load"]
    # The Python client's block.
    lines = printed.splitlines()
    assert lines[0] == "completed"
    assert lines[1] == "{'resize': 'completed', 'notify': 'completed'}"
    assert any(" resize-cat 2" in line for line in lines[2:])
