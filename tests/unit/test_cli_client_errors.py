"""The ``jobs``, ``cron`` and ``stats`` commands' errors in the CLI's terms: every field a
command sends has the flag its errors name, and an API error names the flag, not the API
field; the API is httpx's MockTransport."""

from __future__ import annotations

import argparse
import importlib
import json
from typing import Any

import httpx
import pytest

from jobscheduler.cli import main as cli

from .test_cli_client import JOB_ID, api, job  # noqa: F401 (the fixture)

#: Each action with every option it has (several lines where options exclude each other).
EVERY_OPTION: list[list[str]] = [
    ["jobs", "list", "--tenant", "a", "--status", "dlq", "--type", "t", "--template", JOB_ID,
     "--created-after", "2026-01-01T00:00:00Z", "--created-before", "2026-02-01T00:00:00Z",
     "--key-prefix", "k", "--sort", "scheduledAt", "--limit", "5"],
    ["jobs", "list", "--all-tenants", "--key", "k"],
    ["jobs", "get", JOB_ID, "--attempts"],
    ["jobs", "create", "noop", "--tenant", "a", "--payload", "{}", "--at",
     "2026-01-01T00:00:00Z", "--key", "k", "--priority", "1", "--max-attempts", "2"],
    ["jobs", "create", "noop", "--tenant", "a", "--cron", "0 9 * * *", "--timezone", "UTC"],
    ["jobs", "cancel", JOB_ID, JOB_ID.replace("0", "1"), "--tenant", "a", "--status", "pending",
     "--type", "t", "--template", JOB_ID, "--created-after", "2026-01-01T00:00:00Z",
     "--created-before", "2026-02-01T00:00:00Z", "--key", "k", "--dry-run"],
    ["jobs", "cancel", "--tenant", "a", "--key-prefix", "k"],
    ["jobs", "retry", JOB_ID, "--payload", "{}", "--at", "2026-01-01T00:00:00Z"],
    ["jobs", "retry", "--tenant", "a", "--status", "dlq", "--at", "2026-01-01T00:00:00Z",
     "--dry-run"],
    ["cron", "list", "--tenant", "a", "--limit", "5"],
    ["cron", "list", "--all-tenants"],
    ["cron", "update", JOB_ID, "--cron", "0 9 * * *", "--payload", "{}", "--priority", "1",
     "--max-attempts", "2"],
    ["cron", "preview", "0 9 * * *", "--timezone", "UTC", "--count", "2", "--from",
     "2026-01-01T00:00:00Z"],
    ["cron", "next", JOB_ID, "--count", "2"],
    ["cron", "ledger", JOB_ID, "--limit", "5"],
    *[["cron", action, JOB_ID] for action in ("pause", "resume", "trigger", "delete")],
    ["stats", "--tenant", "a"],
    ["workflows", "create", "--tenant", "a", "--key", "k", "--steps",
     '[{"name": "s", "jobType": "noop"}]'],
    ["workflows", "get", JOB_ID],
    ["workflows", "list", "--tenant", "a", "--status", "failed", "--key-prefix", "k",
     "--template", JOB_ID, "--limit", "5"],
    ["workflows", "cancel", JOB_ID],
    ["workflows", "retry", JOB_ID, "--step", "s"],
]  # fmt: skip
#: Fields a command sends of its own accord, not from an option (``cron list``: cron=true).
SET_BY_COMMAND = {("cron", "list"): {"cron"}}


def answer_anything(request: httpx.Request) -> httpx.Response:
    """An answer every command can read (it does not matter what it says here)."""
    path = request.url.path
    if path == "/cron/preview" or path.endswith("/next"):
        return httpx.Response(200, json={"cron": "0 9 * * *", "timezone": "UTC", "fireTimes": []})
    if path.endswith("/occurrences"):
        return httpx.Response(200, json={"occurrences": []})
    if path.endswith("/attempts"):
        return httpx.Response(200, json={"jobId": JOB_ID, "attempts": []})
    if path in ("/jobs/cancel", "/jobs/retry"):
        return httpx.Response(200, json={"matched": 0, "changed": 0, "cancelRequested": 0})
    if request.method == "GET" and path in ("/jobs", "/workflows"):
        return httpx.Response(200, json=[])
    if path.startswith("/workflows"):
        return httpx.Response(200, json={"id": JOB_ID, "status": "running", "steps": []})
    return httpx.Response(200, json=job())


def fields_sent(request: httpx.Request) -> set[str]:
    """The request fields: query parameter names, body keys (``filter.<key>`` inside it)."""
    names = set(request.url.params) - {"cursor"}
    body = json.loads(request.content) if request.content else {}
    for key, value in body.items():
        if key == "filter":
            names |= {f"filter.{inner}" for inner in value}
        else:
            names.add(key)
    return names


@pytest.mark.parametrize("argv", EVERY_OPTION, ids=" ".join)
def test_every_field_a_command_sends_has_the_flag_its_errors_name(
    api: Any,  # noqa: F811
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen = api(answer_anything)
    assert cli.main(argv) == 0, capsys.readouterr().err
    command, action = argv[0], argv[1] if argv[0] != "stats" else ""
    flags = importlib.import_module(cli.COMMAND_MODULES[command]).FLAGS[action]
    sent = set().union(*(fields_sent(request) for request in seen))
    assert sent - set(flags) <= SET_BY_COMMAND.get((command, action), set())
    # ... and each is one of the action's options (or its positional argument).
    assert set(flags.values()) <= options_of(argv)


def options_of(argv: list[str]) -> set[str]:
    """The option strings and positional metavars of the command (and action) of ``argv``."""
    parser: argparse.ArgumentParser = cli.build_parser(argv[0])
    for word in argv[: 1 if argv[0] == "stats" else 2]:
        [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[word]
    return {
        name
        for action in parser._actions
        for name in (action.option_strings or [str(action.metavar or action.dest)])
    }


@pytest.mark.parametrize(
    ("argv", "error", "said"),
    [
        (["jobs", "list"], "tenantId is required", "--tenant is required"),
        (
            ["jobs", "create", "noop", "--tenant", "a", "--at", "2026-12-02T09:00:00"],
            "scheduledAt 2026-12-02T09:00:00 has no time zone; add Z or +01:00",
            "--at 2026-12-02T09:00:00 has no time zone; add Z or +01:00",
        ),
        (
            ["jobs", "create", "noop", "--tenant", "a", "--cron", "0 0 31 2 *"],
            "cron: day 31 never occurs in February",
            "--cron: day 31 never occurs in February",
        ),
        (
            ["cron", "preview", "61 * * * *"],
            "cron: minute 61 is out of range 0-59",
            "EXPRESSION: minute 61 is out of range 0-59",
        ),
        (
            ["jobs", "list", "--tenant", "a"],
            "give tenantId or allTenants=true, not both",
            "give --tenant or --all-tenants, not both",
        ),
        (
            ["jobs", "cancel", "--tenant", "a", "--status", "done"],
            "filter.status: unknown status 'done' (accepted: pending, ...)",
            "--status: unknown status 'done' (accepted: pending, ...)",
        ),
        (["stats", "--tenant", ""], "tenantId: must be 1 to 256 characters", "--tenant: must be"),
    ],
)
def test_an_api_error_names_the_flag_not_the_api_field(
    api: Any,  # noqa: F811
    argv: list[str],
    error: str,
    said: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    api(lambda r: httpx.Response(400, json={"error": error}))
    assert cli.main(argv) == 1
    assert capsys.readouterr().err.startswith(f"jobscheduler: {said}")
