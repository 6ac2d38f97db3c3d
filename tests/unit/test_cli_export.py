"""``jobscheduler jobs export``: JSON Lines a page at a time, the cursor after each page (on
stderr and beside the file), and a resume with ``--after``; the API is httpx's MockTransport."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobscheduler.cli import common as common
from jobscheduler.cli import main as cli
from jobscheduler.client import Client

PAGES = {
    None: ([{"id": "a" * 24}, {"id": "b" * 24}], "c1"),
    "c1": ([{"id": "c" * 24}], "c2"),
    "c2": ([{"id": "d" * 24}], None),
}


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        items, following = PAGES[request.url.params.get("cursor")]
        headers = {}
        if following is not None:
            headers["Link"] = f'</jobs?tenantId=acme&cursor={following}>; rel="next"'
        return httpx.Response(200, json=items, headers=headers)

    def client_of(args: Any) -> Client:
        return Client("http://api.test", transport=httpx.MockTransport(answer))

    monkeypatch.setattr(common, "client_of", client_of)
    return requests


def test_export_writes_every_page_and_each_cursor(
    seen: list[httpx.Request], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "acme.jsonl"
    argv = ["jobs", "export", "--tenant", "acme", "--status", "completed"]
    argv += ["--finished-before", "2026-01-01T00:00:00Z", "-o", str(out)]
    assert cli.main(argv) == 0
    assert [json.loads(line)["id"][0] for line in out.read_text().splitlines()] == list("abcd")
    err = capsys.readouterr().err
    assert "cursor: c1" in err
    assert "cursor: c2" in err
    assert "exported 4 jobs" in err
    assert not (tmp_path / "acme.jsonl.cursor").exists()  # finished: nothing to resume
    first = seen[0].url.params
    assert first["finishedBefore"] == "2026-01-01T00:00:00Z"
    assert first["status"] == "completed"


def test_export_resumes_after_a_cursor_and_appends(
    seen: list[httpx.Request], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "acme.jsonl"
    out.write_text('{"id":"aaaaaaaaaaaaaaaaaaaaaaaa"}\n')
    assert cli.main(["jobs", "export", "--tenant", "acme", "-o", str(out), "--after", "c1"]) == 0
    assert [json.loads(line)["id"][0] for line in out.read_text().splitlines()] == list("acd")
    assert seen[0].url.params["cursor"] == "c1"


def test_the_cursor_file_holds_the_next_page_while_an_export_runs(
    seen: list[httpx.Request], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "acme.jsonl"
    cursors: list[str] = []
    real_send = Client._send

    def send(self: Client, call: Any) -> Any:
        marker = tmp_path / "acme.jsonl.cursor"
        if marker.exists():
            cursors.append(marker.read_text().strip())
        return real_send(self, call)

    monkeypatch.setattr(Client, "_send", send)
    assert cli.main(["jobs", "export", "--tenant", "acme", "-o", str(out)]) == 0
    assert cursors == ["c1", "c2"]


def test_export_to_stdout_prints_one_job_per_line(
    seen: list[httpx.Request], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["jobs", "export", "--all-tenants"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert seen[0].url.params["allTenants"] == "true"
