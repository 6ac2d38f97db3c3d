"""``jobscheduler workflows``: a create from inline steps or a file, a workflow shown with a
table of its steps, the listing; the API is httpx's MockTransport."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobscheduler.cli import main as cli

from .test_cli_client import JOB_ID, api  # noqa: F401 (the fixture)

WORKFLOW = {
    "id": JOB_ID,
    "tenantId": "acme",
    "idempotencyKey": "etl-1",
    "status": "running",
    "stepCount": 2,
    "steps": [
        {"name": "export", "status": "pending", "jobType": "noop", "dependsOn": [],
         "attempts": 0, "jobId": "1" * 24},
        {"name": "transform", "status": "waiting", "jobType": "noop",
         "dependsOn": ["export"], "attempts": 0, "jobId": "2" * 24},
    ],
}  # fmt: skip
STEPS = [{"name": "export", "jobType": "noop"}]


def test_create_sends_the_steps_and_shows_each_steps_status(
    api: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen = api(lambda r: httpx.Response(201, json=WORKFLOW))
    argv = ["workflows", "create", "--tenant", "acme", "--key", "etl-1", "--steps"]
    assert cli.main([*argv, json.dumps(STEPS)]) == 0
    assert json.loads(seen[0].content) == {
        "tenantId": "acme",
        "idempotencyKey": "etl-1",
        "steps": STEPS,
    }
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["id", JOB_ID]
    table = out[out.index("") + 1 :]
    assert table[0].split()[:3] == ["STEP", "STATUS", "TYPE"]
    assert table[2].split()[:2] == ["transform", "waiting"]


def test_create_reads_a_file_of_steps_or_an_object_holding_them(
    api: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    seen = api(lambda r: httpx.Response(201, json=WORKFLOW))
    path = tmp_path / "etl.json"
    path.write_text(json.dumps({"steps": STEPS}))
    argv = ["workflows", "create", "--tenant", "acme", "--key", "etl-1", "--file", str(path)]
    assert cli.main([*argv, "--json"]) == 0
    assert json.loads(seen[0].content)["steps"] == STEPS


def test_steps_that_are_not_a_json_list_are_a_usage_error(api: Any) -> None:  # noqa: F811
    seen = api(lambda r: httpx.Response(201, json=WORKFLOW))
    with pytest.raises(SystemExit):
        cli.main(["workflows", "create", "--tenant", "a", "--key", "k", "--steps", '{"a": 1}'])
    assert seen == []


def test_an_unknown_step_comes_back_as_one_line_naming_the_flag(
    api: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    api(lambda r: httpx.Response(400, json={"error": "steps[0].dependsOn: unknown step 'x'"}))
    argv = ["workflows", "create", "--tenant", "a", "--key", "k", "--steps", json.dumps(STEPS)]
    assert cli.main(argv) == 1
    assert capsys.readouterr().err == "jobscheduler: --steps[0].dependsOn: unknown step 'x'\n"
