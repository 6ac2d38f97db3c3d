"""``jobscheduler webhooks``: each action's request and what it prints (the API is httpx's
MockTransport, as in ``test_cli_client``)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from jobscheduler.cli import main as cli

from .test_cli_client import api as api  # the fixture

HOOK_ID = "65f0a1b2c3d4e5f6a7b8c9d0"
HOOK = {
    "id": HOOK_ID,
    "tenantId": "acme",
    "url": "https://hooks.example.com/jobs",
    "events": ["job.dlq", "template.run_failed"],
    "name": "ops",
    "createdAt": "2026-01-01T00:00:00Z",
}


@pytest.mark.parametrize("action", ["add", "list", "remove", "deliveries"])
def test_every_webhooks_action_has_help(action: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["webhooks", action, "--help"])
    assert exited.value.code == 0
    assert f"usage: jobscheduler webhooks {action}" in capsys.readouterr().out


def test_add_posts_the_url_and_events_and_prints_the_secret_once(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = api(lambda r: httpx.Response(201, json={**HOOK, "secret": "whsec_s3cret"}))
    argv = [
        "webhooks",
        "add",
        HOOK["url"],
        "--event",
        "job.dlq",
        "--event",
        "template.run_failed",
        "--tenant",
        "acme",
        "--name",
        "ops",
    ]
    assert cli.main(argv) == 0
    [request] = seen
    assert (request.method, request.url.path) == ("POST", "/webhooks")
    assert json.loads(request.content) == {
        "url": HOOK["url"],
        "events": ["job.dlq", "template.run_failed"],
        "tenantId": "acme",
        "name": "ops",
    }
    out = capsys.readouterr().out
    assert "whsec_s3cret" in out
    assert "shown only now" in out


def test_add_refuses_an_unknown_event_before_sending(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = api(lambda r: httpx.Response(500))
    with pytest.raises(SystemExit) as exited:
        cli.main(["webhooks", "add", "https://x.example", "--event", "job.done"])
    assert exited.value.code == 2
    assert seen == []


def test_list_prints_a_table_without_secrets(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    seen = api(lambda r: httpx.Response(200, json=[HOOK]))
    assert cli.main(["webhooks", "list", "--tenant", "acme"]) == 0
    assert seen[0].url.params["tenantId"] == "acme"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["ID", "TENANT", "URL"]
    assert lines[1].split()[:3] == [HOOK_ID, "acme", HOOK["url"]]


def test_remove_deletes_by_id(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    seen = api(lambda r: httpx.Response(200, json=HOOK))
    assert cli.main(["webhooks", "remove", HOOK_ID, "--json"]) == 0
    assert (seen[0].method, seen[0].url.path) == ("DELETE", f"/webhooks/{HOOK_ID}")
    assert json.loads(capsys.readouterr().out)["id"] == HOOK_ID


def test_deliveries_prints_status_attempts_and_last_error(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    delivery = {
        "id": "e.w",
        "eventId": "e",
        "eventType": "job.dlq",
        "status": "pending",
        "attempts": 2,
        "lastStatus": 503,
        "lastError": "answered 503",
        "nextAttemptAt": "2026-01-01T00:00:10Z",
        "createdAt": "2026-01-01T00:00:00Z",
    }
    seen = api(lambda r: httpx.Response(200, json={"webhookId": HOOK_ID, "deliveries": [delivery]}))
    assert cli.main(["webhooks", "deliveries", HOOK_ID, "--limit", "5"]) == 0
    assert seen[0].url.path == f"/webhooks/{HOOK_ID}/deliveries"
    assert seen[0].url.params["limit"] == "5"
    row = capsys.readouterr().out.splitlines()[1]
    assert "pending" in row
    assert "answered 503" in row


def test_an_unknown_webhook_is_a_one_line_error(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    api(lambda r: httpx.Response(404, json={"error": f"webhook {HOOK_ID} not found"}))
    assert cli.main(["webhooks", "remove", HOOK_ID]) == 1
    assert f"webhook {HOOK_ID} not found" in capsys.readouterr().err
