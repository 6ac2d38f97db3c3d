"""The cron template routes through the app's test client: pause and resume, trigger, patch
(schedule, overlap policy, validation), delete, and template actions on a one-off job. The
clock is a ManualClock at BASE (2026-01-01T00:00Z), so times in responses are exact."""

from __future__ import annotations

from typing import Any

import pytest

from jobscheduler.clock import ManualClock

from .api_support import (
    Api,
    create_body,
    fast_api,  # noqa: F401  (registers the ``api`` fixture)
    post,
)


async def template(api: Api, **overrides: Any) -> dict[str, Any]:
    body = create_body(**{"scheduledAt": None, "cron": "0 * * * *", **overrides})
    reply = await api.create(body)
    assert reply.status == 201, reply.text
    result: dict[str, Any] = reply.json
    return result


# ----------------------------------------------------------------------------- templates


async def test_pause_then_resume_fires_next_from_now_without_a_burst(api: Api) -> None:
    created = await template(api)
    assert created["scheduledAt"] == "2026-01-01T01:00:00Z"
    paused = await post(api, f"/jobs/{created['id']}/pause")
    assert (paused.status, paused.json["status"]) == (200, "paused")
    assert (await post(api, f"/jobs/{created['id']}/pause")).json == paused.json
    clock = api.deps.clock
    assert isinstance(clock, ManualClock)
    clock.advance(5 * 3600 + 60)  # five fire times pass while paused
    resumed = await post(api, f"/jobs/{created['id']}/resume")
    assert resumed.json["status"] == "pending"
    assert resumed.json["scheduledAt"] == "2026-01-01T06:00:00Z"  # the next one, not 01:00


async def test_trigger_runs_a_template_once_now_with_its_own_identity(api: Api) -> None:
    created = await template(api)
    reply = await post(api, f"/jobs/{created['id']}/trigger")
    assert reply.status == 201, reply.text
    run = reply.json
    assert run["templateId"] == created["id"]
    assert run["scheduledAt"] == "2026-01-01T00:00:00Z"
    assert run["idempotencyKey"] == "test-job-1-run-1767225600000000000"
    assert "cron" not in run
    # Its runs are listable by template id.
    listed = await api.get("/jobs", tenantId="tenant-a", templateId=created["id"])
    assert [j["id"] for j in listed.json] == [run["id"]]


async def test_patch_changes_the_schedule_and_recomputes_the_next_fire(api: Api) -> None:
    created = await template(api, timezone="Europe/Paris")
    reply = await api.request(
        "PATCH",
        f"/jobs/{created['id']}",
        json={"cron": "30 9 * * *", "priority": 9, "maxAttempts": 5, "payload": {"message": "x"}},
    )
    assert reply.status == 200, reply.text
    body = reply.json
    assert (body["cron"], body["priority"], body["maxAttempts"]) == ("30 9 * * *", 9, 5)
    assert body["payload"] == {"message": "x"}
    assert body["timezone"] == "Europe/Paris"  # the other schedule fields stay
    assert body["scheduledAt"] == "2026-01-01T08:30:00Z"
    zone = await api.request("PATCH", f"/jobs/{created['id']}", json={"timezone": "UTC"})
    assert zone.json["scheduledAt"] == "2026-01-01T09:30:00Z"


@pytest.mark.parametrize("overlap", ["skip", "buffer_one", "cancel_previous", "allow"])
async def test_patch_changes_the_overlap_policy_and_keeps_the_schedule(
    api: Api, overlap: str
) -> None:
    created = await template(api, timezone="Europe/Paris", overlap="skip")
    reply = await api.request("PATCH", f"/jobs/{created['id']}", json={"overlap": overlap})
    assert reply.status == 200, reply.text
    assert reply.json["overlap"] == overlap
    assert reply.json["timezone"] == "Europe/Paris"
    assert reply.json["scheduledAt"] == created["scheduledAt"]
    assert (await api.get(f"/jobs/{created['id']}")).json["overlap"] == overlap


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"cron": "every day"}, "cron"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"priority": "high"}, "priority"),
        ({"maxAttempts": 0}, "maxAttempts"),
        ({"overlap": "queue"}, "overlap: must be one of"),
        ({"overlap": 1}, "overlap: must be one of"),
        ({"jobType": "noop"}, "unknown field"),
        ({}, "nothing to change"),
    ],
)
async def test_patch_is_validated(api: Api, body: Any, fragment: str) -> None:
    created = await template(api)
    reply = await api.request("PATCH", f"/jobs/{created['id']}", json=body)
    reply.assert_error(400, fragment)


async def test_delete_retires_a_template_and_keeps_its_runs(api: Api) -> None:
    created = await template(api)
    run = (await post(api, f"/jobs/{created['id']}/trigger")).json
    reply = await api.request("DELETE", f"/jobs/{created['id']}")
    assert (reply.status, reply.json["status"]) == (200, "cancelled")
    assert (await api.request("DELETE", f"/jobs/{created['id']}")).status == 200  # idempotent
    assert (await api.get(f"/jobs/{run['id']}")).json["status"] == "pending"
    assert (await post(api, f"/jobs/{created['id']}/trigger")).status == 409
    assert (await post(api, f"/jobs/{created['id']}/resume")).status == 409


async def test_template_actions_on_a_one_off_job_are_409(api: Api) -> None:
    created = (await api.create(create_body())).json
    for action in ("pause", "resume", "trigger"):
        reply = await post(api, f"/jobs/{created['id']}/{action}")
        assert reply.status == 409
        assert "not a cron template" in reply.json["error"]
    assert (await api.request("DELETE", f"/jobs/{created['id']}")).status == 409
    assert (
        await api.request("PATCH", f"/jobs/{created['id']}", json={"priority": 1})
    ).status == 409
