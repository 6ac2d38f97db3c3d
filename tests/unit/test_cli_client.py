"""The ``jobs``, ``cron`` and ``stats`` commands: help everywhere, tables by default, JSON
with ``--json``, one-line errors; the API is httpx's MockTransport."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from jobscheduler.cli import common as common
from jobscheduler.cli import main as cli
from jobscheduler.client import Client

JOB_ID = "65f0a1b2c3d4e5f6a7b8c9d0"

ACTIONS = {
    "jobs": ["list", "get", "create", "cancel", "retry"],
    "cron": [
        "list",
        "pause",
        "resume",
        "trigger",
        "update",
        "delete",
        "preview",
        "next",
        "ledger",
    ],
    "workflows": ["create", "get", "list", "cancel", "retry"],
}


@pytest.mark.parametrize(
    "argv",
    [["jobs"], ["cron"], ["stats"]]
    + [[command, action] for command, actions in ACTIONS.items() for action in actions],
    ids=" ".join,
)
def test_every_command_has_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([*argv, "--help"])
    assert exited.value.code == 0
    assert "usage: jobscheduler " + " ".join(argv) in capsys.readouterr().out


def test_top_level_help_lists_the_api_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in ("jobs", "cron", "stats"))


Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Callable[[Handler], list[httpx.Request]]:
    """Route the commands' client to a MockTransport answering with ``handler``."""

    def install(handler: Handler) -> list[httpx.Request]:
        seen: list[httpx.Request] = []

        def record(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return handler(request)

        def client_of(args: Any) -> Client:
            return Client("http://api.test", transport=httpx.MockTransport(record))

        monkeypatch.setattr(common, "client_of", client_of)
        return seen

    return install


def job(**fields: Any) -> dict[str, Any]:
    base = {"id": JOB_ID, "tenantId": "acme", "jobType": "noop", "status": "pending"}
    return {**base, "scheduledAt": "2026-01-01T00:00:00Z", "attempts": 0, **fields}


def test_jobs_list_prints_an_aligned_table(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    api(lambda r: httpx.Response(200, json=[job(), job(id="x" * 24, status="dlq")]))
    assert cli.main(["jobs", "list", "--tenant", "acme", "--status", "dlq"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "TENANT", "TYPE", "STATUS", "SCHEDULED", "ATTEMPTS", "CRON"]
    assert lines[1].split()[:4] == [JOB_ID, "acme", "noop", "pending"]
    assert lines[2].split()[3] == "dlq"
    # Aligned: every row's status starts under the STATUS heading.
    column = lines[0].index("STATUS")
    assert [line[column:].split()[0] for line in lines[1:]] == ["pending", "dlq"]


def test_jobs_list_json_is_the_list_and_stops_at_the_limit(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    api(lambda r: httpx.Response(200, json=[job(), job(), job()]))
    assert cli.main(["jobs", "list", "--tenant", "acme", "--limit", "2", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


def test_an_empty_list_says_none(api: Any, capsys: pytest.CaptureFixture[str]) -> None:
    api(lambda r: httpx.Response(200, json=[]))
    assert cli.main(["cron", "list", "--tenant", "acme"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "(none)"


def test_bulk_retry_sends_the_filters_and_prints_the_count(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = api(lambda r: httpx.Response(200, json={"changed": 7}))
    argv = ["jobs", "retry", "--tenant", "acme", "--status", "dlq", "--type", "noop"]
    assert cli.main(argv) == 0
    sent = json.loads(seen[0].content)
    assert sent == {"filter": {"tenantId": "acme", "status": ["dlq"], "jobType": "noop"}}
    assert seen[0].url.path == "/jobs/retry"
    assert capsys.readouterr().out.split() == ["changed", "7"]


def test_cancel_without_ids_or_tenant_refuses_to_act_on_everything(api: Any) -> None:
    seen = api(lambda r: httpx.Response(200, json={}))
    with pytest.raises(SystemExit, match="give job ids, or --tenant"):
        cli.main(["jobs", "cancel"])
    assert seen == []


def test_an_error_answer_is_one_line_on_stderr_and_exit_1(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    api(lambda r: httpx.Response(409, json={"error": f"job {JOB_ID} is completed"}))
    assert cli.main(["cron", "pause", JOB_ID]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"jobscheduler: job {JOB_ID} is completed\n"


def test_stats_flattens_nested_counts_into_rows(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    api(lambda r: httpx.Response(200, json={"byStatus": {"pending": 2}, "queueLagSeconds": 1.5}))
    assert cli.main(["stats", "--tenant", "acme"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows == [
        ["WHAT", "NAME", "VALUE"],
        ["byStatus", "pending", "2"],
        ["queueLagSeconds", "1.5"],
    ]


def test_jobs_list_sends_the_sort_and_the_key_prefix(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = api(lambda r: httpx.Response(200, json=[job(idempotencyKey="order-1")]))
    argv = ["jobs", "list", "--tenant", "acme", "--sort", "scheduledAt", "--key-prefix", "order-"]
    assert cli.main([*argv, "--json"]) == 0
    params = seen[0].url.params
    assert (params["sort"], params["idempotencyKeyPrefix"]) == ("scheduledAt", "order-")
    assert json.loads(capsys.readouterr().out)[0]["idempotencyKey"] == "order-1"
    api(lambda r: httpx.Response(200, json=[]))
    assert cli.main(["jobs", "list", "--tenant", "acme", "--key", "order-1"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["jobs", "list", "--tenant", "a", "--sort", "newest"], "invalid choice: 'newest'"),
        (["jobs", "list", "--tenant", "a", "--key", "k", "--key-prefix", "k"], "not allowed with"),
        (["jobs", "cancel", "--tenant", "a", "--key-prefix", ""], "must not be empty"),
        (["jobs", "retry", JOB_ID, "--payload", "{}", "--dry-run"], "--payload needs job ids"),
        (["jobs", "retry", "--tenant", "a", "--payload", "{}"], "--payload needs job ids"),
    ],
)
def test_a_bad_listing_or_bulk_option_is_a_one_line_usage_error(
    api: Any, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = api(lambda r: httpx.Response(200, json=[]))
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert seen == []


def test_a_dry_run_sends_dry_run_and_prints_the_counts(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = {"matched": 4, "changed": 0, "cancelRequested": 0, "dryRun": True}
    seen = api(lambda r: httpx.Response(200, json=answer))
    assert cli.main(["jobs", "cancel", "--tenant", "acme", "--status", "pending", "--dry-run"]) == 0
    assert json.loads(seen[0].content) == {
        "filter": {"tenantId": "acme", "status": ["pending"]},
        "dryRun": True,
    }
    assert capsys.readouterr().out.split() == [
        *("matched", "4", "changed", "0", "cancelRequested", "0", "dryRun", "True"),
    ]


def test_many_ids_go_as_bulk_requests_of_at_most_1000_and_the_counts_add_up(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        n = len(json.loads(request.content)["filter"]["ids"])
        return httpx.Response(200, json={"matched": n, "changed": n - 1, "cancelRequested": 0})

    seen = api(answer)
    ids = [f"{n:024x}" for n in range(2500)]
    assert cli.main(["jobs", "retry", *ids, ids[0], "--at", "2030-01-01T00:00:00Z", "--json"]) == 0
    bodies = [json.loads(request.content) for request in seen]
    assert [len(body["filter"]["ids"]) for body in bodies] == [1000, 1000, 500]
    assert [i for body in bodies for i in body["filter"]["ids"]] == ids  # the repeat dropped
    assert {request.url.path for request in seen} == {"/jobs/retry"}
    assert all(body["scheduledAt"] == "2030-01-01T00:00:00Z" for body in bodies)
    assert json.loads(capsys.readouterr().out) == {
        "matched": 2500,
        "changed": 2497,
        "cancelRequested": 0,
    }


def test_one_id_alone_still_uses_the_jobs_own_route_and_prints_it(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = api(lambda r: httpx.Response(200, json=job(status="cancelled")))
    assert cli.main(["jobs", "cancel", JOB_ID]) == 0
    assert seen[0].url.path == f"/jobs/{JOB_ID}/cancel"
    assert capsys.readouterr().out.splitlines()[1].split()[3] == "cancelled"
    seen = api(lambda r: httpx.Response(200, json={"matched": 1, "changed": 0}))
    assert cli.main(["jobs", "cancel", JOB_ID, "--dry-run"]) == 0
    assert json.loads(seen[0].content) == {"filter": {"ids": [JOB_ID]}, "dryRun": True}


def test_cron_ledger_prints_each_fire_time_with_its_run_and_follows_pages_up_to_the_limit(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    spawned = {
        "fireAt": "2026-01-01T09:00:00Z",
        "fireAtLocal": "2026-01-01T10:00:00+01:00",
        "status": "spawned",
        "runId": "r" * 24,
        "lateSeconds": 0.012,
        "run": {"status": "completed", "attempts": 1},
    }
    skipped = {
        "fireAt": "2026-01-01T08:00:00Z",
        "fireAtLocal": "2026-01-01T09:00:00+01:00",
        "status": "skipped",
        "reason": "paused",
    }

    def answer(request: httpx.Request) -> httpx.Response:
        if "cursor" in request.url.params:
            return httpx.Response(200, json={"id": JOB_ID, "occurrences": [skipped, skipped]})
        link = f'<http://api.test/jobs/{JOB_ID}/occurrences?limit=2&cursor=c1>; rel="next"'
        page = {"id": JOB_ID, "occurrences": [spawned, skipped], "nextCursor": "c1"}
        return httpx.Response(200, json=page, headers={"Link": link})

    seen = api(answer)
    assert cli.main(["cron", "ledger", JOB_ID, "--limit", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "FIRE", "AT", "(UTC)", "LOCAL", "STATUS", "REASON", "RUN", "RUN", "STATUS", "LATE", "(S)"
    ]  # fmt: skip
    assert lines[1].split() == [
        "2026-01-01T09:00:00Z", "2026-01-01T10:00:00+01:00", "spawned", "-", "r" * 24,
        "completed", "0.012",
    ]  # fmt: skip
    assert lines[2].split()[2:] == ["skipped", "paused", "-", "-", "-"]
    assert len(lines) == 4  # the limit: 3 rows of the 4 the two pages hold
    assert [r.url.path for r in seen] == [f"/jobs/{JOB_ID}/occurrences"] * 2
    assert seen[0].url.params["limit"] == "3"
    assert seen[1].url.params["cursor"] == "c1"


def test_cron_ledger_of_an_unknown_template_is_one_line_and_exit_1(
    api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    api(lambda r: httpx.Response(404, json={"error": f"job {JOB_ID} not found"}))
    assert cli.main(["cron", "ledger", JOB_ID]) == 1
    assert capsys.readouterr().err.strip() == f"jobscheduler: job {JOB_ID} not found"
