"""The Python client and the CLI against a live ``jobscheduler dev``: create, wait for the
outcome, read it back, and get the project's exceptions for error answers."""

from __future__ import annotations

import ast
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from jobscheduler.client import AsyncClient, Client, job_body
from jobscheduler.errors import DuplicateJob, InvalidTransition, JobNotFound, ValidationError
from tests.support.dev_server import DevServer
from tests.support.docblocks import doc_blocks
from tests.support.processes import CompletedCli, run_cli, run_command

from .conftest import readme_env

pytestmark = pytest.mark.e2e

TENANT = "client-e2e"


def key(name: str) -> str:
    return f"{name}-{time.time_ns()}"


def test_create_then_wait_returns_the_completed_job_with_its_result(live_dev: DevServer) -> None:
    with Client(live_dev.url, api_key=live_dev.key) as client:
        created = client.create("slow", tenant_id=TENANT, payload={"sleepMs": 10})
        assert created["status"] == "pending"
        done = client.wait(created["id"], timeout=20)
        assert done["status"] == "completed"
        assert done["result"] == {"sleptMs": 10}
        assert done["attempts"] == 1
        assert client.get(created["id"])["status"] == "completed"
        (attempt,) = client.attempts(created["id"])
        assert attempt["outcome"] == "completed"


def test_create_many_answers_each_body_and_a_handler_result_is_on_the_job(
    live_dev: DevServer,
) -> None:
    tenant = key("batch")
    with Client(live_dev.url, api_key=live_dev.key) as client:
        taken = client.create("noop", tenant_id=tenant, idempotency_key=key("taken"))
        answers = client.create_many(
            [
                job_body("log-message", tenant_id=tenant, payload={"message": "one"}),
                job_body("noop", tenant_id=tenant, idempotency_key=taken["idempotencyKey"]),
                job_body("log-message", tenant_id=tenant, payload={}),
            ]
        )
        assert [a["status"] for a in answers] == [201, 409, 400]
        assert answers[1]["jobId"] == taken["id"]
        done = client.wait(answers[0]["job"]["id"], timeout=20)
        assert done["status"] == "completed"


def test_a_failing_job_waits_into_the_dlq(live_dev: DevServer) -> None:
    with Client(live_dev.url, api_key=live_dev.key) as client:
        created = client.create(
            "flaky", tenant_id=TENANT, payload={"failRate": 1.0}, max_attempts=1
        )
        done = client.wait(created["id"], timeout=20)
    assert done["status"] == "dlq"
    assert done["lastError"]


def test_errors_are_the_projects_exceptions(live_dev: DevServer) -> None:
    with Client(live_dev.url, api_key=live_dev.key) as client:
        first = client.create("noop", tenant_id=TENANT, idempotency_key=key("dup"))
        with pytest.raises(DuplicateJob) as caught:
            client.create("noop", tenant_id=TENANT, idempotency_key=first["idempotencyKey"])
        assert first["idempotencyKey"] in str(caught.value)
        assert caught.value.existing_id == first["id"]
        with pytest.raises(JobNotFound):
            client.get("0" * 24)
        with pytest.raises(ValidationError, match="unknown job type 'nope'"):
            client.create("nope", tenant_id=TENANT)


def test_create_many_list_and_cron_previews(live_dev: DevServer) -> None:
    tenant = key("tenant")
    with Client(live_dev.url, api_key=live_dev.key) as client:
        for n in range(3):
            client.create("noop", tenant_id=tenant, payload={"n": n})
        listed = list(client.list(tenant))
        assert len(listed) == 3
        assert {job["tenantId"] for job in listed} == {tenant}
        template = client.create("noop", tenant_id=tenant, cron="*/5 * * * *", timezone="UTC")
        fires = client.next(template["id"], count=2)["fireTimes"]
        assert len(fires) == 2
        assert fires[0]["at"] == template["scheduledAt"]
        preview = client.preview("30 2 * * *", timezone="Europe/Paris", count=3)
        assert [f["local"][11:16] for f in preview["fireTimes"]] == ["02:30"] * 3
    assert job_body("noop", tenant_id=tenant)["tenantId"] == tenant


def test_cancel_retry_from_dlq_and_bulk_retry(live_dev: DevServer) -> None:
    tenant = key("actions")
    with Client(live_dev.url, api_key=live_dev.key) as client:
        later = client.create("noop", tenant_id=tenant, scheduled_at="2999-01-01T00:00:00Z")
        assert client.cancel(later["id"])["status"] == "cancelled"
        with pytest.raises(InvalidTransition) as caught:
            client.cancel(client.wait(client.create("noop", tenant_id=tenant)["id"])["id"])
        assert caught.value.status == "completed"
        dead = client.create("flaky", tenant_id=tenant, payload={"failRate": 1.0}, max_attempts=1)
        assert client.wait(dead["id"], timeout=20)["status"] == "dlq"
        again = client.retry(dead["id"], payload={"failRate": 0.0})
        assert again["status"] == "pending"
        assert client.wait(dead["id"], timeout=20)["status"] == "completed"
        result = client.bulk_retry(tenant, status="cancelled")
        assert (result["matched"], result["changed"]) == (1, 1)
        assert client.wait(later["id"], timeout=20)["status"] == "completed"  # due now
        stats = client.stats(tenant)
        assert stats["byStatus"]["completed"] == 3


def test_pause_resume_trigger_update_and_delete_a_template(live_dev: DevServer) -> None:
    tenant = key("templates")
    with Client(live_dev.url, api_key=live_dev.key) as client:
        template = client.create("noop", tenant_id=tenant, cron="0 3 * * *")
        assert client.pause(template["id"])["status"] == "paused"
        assert client.resume(template["id"])["status"] == "pending"
        run = client.trigger(template["id"])
        assert run["id"] != template["id"]
        assert run["templateId"] == template["id"]
        assert client.wait(run["id"], timeout=20)["status"] == "completed"
        updated = client.update(template["id"], cron="0 4 * * *")
        assert updated["cron"] == "0 4 * * *"
        assert client.next(template["id"], count=1)["fireTimes"][0]["at"][11:16] == "04:00"
        retired = client.delete(template["id"])
        assert retired["status"] == "cancelled"  # retired: it never fires again
        assert [t["id"] for t in client.list(tenant, cron=True)] == [template["id"]]


async def test_async_client_under_trio_creates_and_waits(live_dev_async: DevServer) -> None:
    async with AsyncClient(live_dev_async.url, api_key=live_dev_async.key) as client:
        created = await client.create("noop", tenant_id=TENANT)
        with trio.fail_after(30):
            done = await client.wait(created["id"], timeout=20)
    assert done["status"] == "completed"


@pytest.fixture
async def live_dev_async(dev_factory: Any) -> DevServer:
    server: DevServer = await dev_factory()
    return server


def cli(server: DevServer, *args: str) -> CompletedCli:
    env = {**os.environ, "JOBSCHEDULER_URL": server.url, "JOBSCHEDULER_API_KEY": server.key or ""}
    return run_cli(*args, env=env)


def test_cli_creates_waits_and_prints_json_for_scripts(live_dev: DevServer) -> None:
    tenant = key("cli")
    done = cli(live_dev, "jobs", "create", "noop", "--tenant", tenant, "--wait", "20", "--json")
    assert done.returncode == 0, done.stderr
    job: dict[str, Any] = json.loads(done.stdout)
    assert job["status"] == "completed"
    shown = cli(live_dev, "jobs", "get", job["id"])
    assert shown.returncode == 0, shown.stderr
    assert "completed" in shown.stdout
    listed = cli(live_dev, "jobs", "list", "--tenant", tenant)
    assert listed.returncode == 0, listed.stderr
    heading, row = listed.stdout.splitlines()
    assert heading.split()[:4] == ["ID", "TENANT", "TYPE", "STATUS"]
    assert row.split()[:4] == [job["id"], tenant, "noop", "completed"]


def test_cli_previews_cron_fire_times_as_a_table(live_dev: DevServer) -> None:
    done = cli(live_dev, "cron", "preview", "0 9 * * 1", "--timezone", "Asia/Tokyo", "--count", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "0 9 * * 1  (Asia/Tokyo)"
    assert len(lines) == 4  # the heading line, the column headings, two fire times
    assert all("09:00:00+09:00" in line for line in lines[2:])


def test_cli_errors_are_one_line_and_a_non_zero_exit(live_dev: DevServer) -> None:
    missing = cli(live_dev, "jobs", "get", "0" * 24)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [f"jobscheduler: job {'0' * 24} not found"]
    bad = cli(live_dev, "jobs", "create", "nope", "--tenant", "t")
    assert bad.returncode == 1
    assert "unknown job type 'nope'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    down = run_cli(
        "jobs",
        "list",
        "--tenant",
        "t",
        env={**os.environ, "JOBSCHEDULER_URL": "http://127.0.0.1:9"},
    )
    assert down.returncode == 1
    assert "127.0.0.1:9" in down.stderr
    usage = cli(live_dev, "jobs", "create", "noop", "--tenant", "t", "--payload", "[1]")
    assert usage.returncode == 2
    assert "must be a JSON object" in usage.stderr


def test_cli_errors_name_the_flags_and_say_what_to_do(live_dev: DevServer) -> None:
    expected = {
        ("jobs", "list"): "--tenant is required",
        ("jobs", "create", "noop", "--tenant", "t", "--at", "2026-12-02T09:00:00"): (
            "--at 2026-12-02T09:00:00 has no time zone; add Z or +01:00"
        ),
        ("jobs", "create", "noop", "--tenant", "t", "--cron", "0 0 31 2 *"): (
            "--cron: day 31 never occurs in February"
        ),
        ("cron", "preview", "61 * * * *"): "EXPRESSION: minute 61 is out of range 0-59",
    }
    for argv, message in expected.items():
        done = cli(live_dev, *argv)
        assert done.returncode == 1, done.stdout
        assert done.stderr.strip().splitlines() == [f"jobscheduler: {message}"], argv


# ----------------------------------------------------------------- the client and CLI guide


def test_python_client_readme_blocks_run_as_pasted(live_dev: DevServer) -> None:
    blocks = doc_blocks("docs/how-to/client-and-cli.md", "python")
    assert len(blocks) == 3, "the sync walk-through, the listing options, the async client"
    outputs = []
    for block in blocks:
        done = run_command([sys.executable, "-c", block], env=readme_env(live_dev), timeout=120)
        assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout.splitlines())
    listing = outputs[1]
    assert listing[0] == "3"
    assert ast.literal_eval(listing[2]) == {
        "matched": 2,
        "changed": 0,
        "cancelRequested": 0,
        "dryRun": True,
    }
    assert listing[3:] == ["2", "1"]


def test_cli_readme_commands_run_as_pasted(live_dev: DevServer, tmp_path: Path) -> None:
    (commands,) = doc_blocks("docs/how-to/client-and-cli.md", "sh", "CLI")
    assert "--sort scheduledAt" in commands
    assert "--dry-run" in commands
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # what `. .venv/bin/activate` finds
    script = ["bash", "-c", "set -euo pipefail\n" + commands]
    done = run_command(script, env=readme_env(live_dev), timeout=240, cwd=tmp_path)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    lines = [line.split() for line in done.stdout.splitlines()]
    assert ["dryRun", "True"] in lines  # the --dry-run commands printed counts
    assert done.stdout.splitlines()[-1] == "exit 1"  # the missing job, last
