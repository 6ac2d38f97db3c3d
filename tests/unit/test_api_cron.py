"""The HTTP surface of cron templates: the schedule fields at create, ``GET
/jobs/{id}/next`` and ``POST /cron/preview``. The clock is a ManualClock at BASE
(2026-01-01T00:00Z), so every time in a response is exact."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from jobscheduler.domain.model import new_job_id

from .api_support import Api, api_deps, create_body, serve
from .conftest import DepsFactory


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(api_deps(make_deps)) as served:
        yield served


def template_body(**overrides: Any) -> dict[str, Any]:
    return create_body(**{"scheduledAt": None, "cron": "30 2 * * *", **overrides})


async def preview(api: Api, body: Any) -> Any:
    return await api.request("POST", "/cron/preview", json=body)


# ----------------------------------------------------------------------------- create


async def test_template_shows_its_zone_policies_and_next_fire_time_in_utc_and_local(
    api: Api,
) -> None:
    reply = await api.create(
        template_body(
            timezone="Europe/Paris", dstGap="skip", catchUp="all", catchUpWindow="2h", jitter="5m"
        )
    )
    assert reply.status == 201, reply.text
    body = reply.json
    assert body["scheduledAt"] == "2026-01-01T01:30:00Z"  # 02:30 CET
    assert body["nextFireLocal"] == "2026-01-01T02:30:00+01:00"
    assert {k: body[k] for k in ("timezone", "dstGap", "dstFold", "catchUp")} == {
        "timezone": "Europe/Paris",
        "dstGap": "skip",
        "dstFold": "first",
        "catchUp": "all",
    }
    assert (body["catchUpWindow"], body["jitter"]) == ("2h", "5m")
    fetched = await api.get(f"/jobs/{body['id']}")
    assert fetched.json == body


async def test_first_fire_time_in_a_zone_respects_the_dst_gap_policy(api: Api) -> None:
    # The clock reads 2026-01-01; use a schedule whose first fire time is the gap day.
    reply = await api.create(template_body(cron="30 2 29 3 *", timezone="Europe/Paris"))
    assert reply.json["scheduledAt"] == "2026-03-29T01:00:00Z"  # 03:00 CEST, shifted
    reply = await api.create(
        template_body(
            idempotencyKey="k2", cron="30 2 29 3 *", timezone="Europe/Paris", dstGap="skip"
        )
    )
    assert reply.json["scheduledAt"] == "2027-03-29T00:30:00Z"  # 2026 skipped


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"timezone": "Europe/Pariss"}, "timezone: unknown time zone 'Europe/Pariss'"),
        ({"timezone": ["UTC"]}, "timezone"),
        ({"dstGap": "forward"}, "dstGap"),
        ({"dstFold": 2}, "dstFold"),
        ({"catchUp": "everything"}, "catchUp"),
        ({"catchUpWindow": "soon"}, "catchUpWindow"),
        ({"jitter": "2d"}, "jitter"),
        ({"jitter": "25h"}, "jitter: must not exceed the schedule's interval (24h)"),
    ],
)
async def test_bad_schedule_fields_are_400_and_store_nothing(
    api: Api, fields: dict[str, Any], fragment: str
) -> None:
    reply = await api.create(template_body(**fields))
    reply.assert_error(400, fragment)
    assert await api.deps.store.list_jobs("tenant-a", None, 10) == []


async def test_schedule_fields_on_a_one_off_job_are_400(api: Api) -> None:
    reply = await api.create(create_body(timezone="Europe/Paris", jitter="1m"))
    reply.assert_error(400, "jitter, timezone: only apply to cron templates")


async def test_one_off_job_json_has_no_schedule_fields(api: Api) -> None:
    body = (await api.create(create_body())).json
    assert not {"timezone", "nextFireLocal", "catchUp"} & set(body)


# ----------------------------------------------------------------------------- next


async def test_next_lists_the_templates_fire_times_starting_with_the_pending_one(
    api: Api,
) -> None:
    created = (
        await api.create(template_body(cron="30 2 * 3 *", timezone="Europe/Paris", jitter="10m"))
    ).json
    reply = await api.get(f"/jobs/{created['id']}/next", count="3")
    assert reply.status == 200, reply.text
    body = reply.json
    assert body["id"] == created["id"]
    assert (body["cron"], body["timezone"], body["dstGap"], body["dstFold"]) == (
        "30 2 * 3 *",
        "Europe/Paris",
        "shift",
        "first",
    )
    times = body["fireTimes"]
    assert [t["at"] for t in times] == [
        "2026-03-01T01:30:00Z",
        "2026-03-02T01:30:00Z",
        "2026-03-03T01:30:00Z",
    ]
    assert times[0]["at"] == created["scheduledAt"]
    assert times[0]["local"] == "2026-03-01T02:30:00+01:00"
    for t in times:
        # Compared as times, not strings ("...00Z" sorts after "...00.410Z").
        at, run_at = (datetime.fromisoformat(t[k].replace("Z", "+00:00")) for k in ("at", "runAt"))
        assert at <= run_at < at + timedelta(minutes=10)  # within the 10 m jitter


async def test_next_marks_shifted_and_repeated_fire_times(api: Api) -> None:
    created = (
        await api.create(
            template_body(cron="30 2 * 3,10 *", timezone="Europe/Paris", dstFold="both")
        )
    ).json
    times = (await api.get(f"/jobs/{created['id']}/next", count="62")).json["fireTimes"]
    shifted = [t for t in times if t["shifted"]]
    assert shifted == [
        {
            "at": "2026-03-29T01:00:00Z",
            "local": "2026-03-29T03:00:00+02:00",
            "shifted": True,
            "repeated": False,
            "wallTime": "2026-03-29T02:30",
        }
    ]
    repeated = [t for t in times if t["repeated"]]
    assert [(t["at"], t["local"], t["occurrence"]) for t in repeated] == [
        ("2026-10-25T00:30:00Z", "2026-10-25T02:30:00+02:00", "first"),
        ("2026-10-25T01:30:00Z", "2026-10-25T02:30:00+01:00", "second"),
    ]


async def test_next_default_count_is_10(api: Api) -> None:
    created = (await api.create(template_body())).json
    assert len((await api.get(f"/jobs/{created['id']}/next")).json["fireTimes"]) == 10


async def test_next_of_a_one_off_job_is_400_unknown_is_404_bad_id_and_count_400(
    api: Api,
) -> None:
    one_off = (await api.create(create_body())).json
    (await api.get(f"/jobs/{one_off['id']}/next")).assert_error(400, "not a cron template")
    (await api.get(f"/jobs/{new_job_id()}/next")).assert_error(404)
    (await api.get("/jobs/nope/next")).assert_error(400, "id")
    created = (await api.create(template_body(idempotencyKey="t"))).json
    for count in ("0", "101", "ten", "-1", "1.5"):
        (await api.get(f"/jobs/{created['id']}/next", count=count)).assert_error(400, "count")


# ----------------------------------------------------------------------------- preview


async def test_preview_answers_fire_times_in_utc_and_local_with_dst_marks(api: Api) -> None:
    reply = await preview(
        api,
        {
            "cron": "30 2 * * *",
            "timezone": "Europe/Paris",
            "count": 3,
            "from": "2026-03-28T00:00:00Z",
        },
    )
    assert reply.status == 200, reply.text
    assert reply.json == {
        "cron": "30 2 * * *",
        "timezone": "Europe/Paris",
        "dstGap": "shift",
        "dstFold": "first",
        "from": "2026-03-28T00:00:00Z",
        "fireTimes": [
            {
                "at": "2026-03-28T01:30:00Z",
                "local": "2026-03-28T02:30:00+01:00",
                "shifted": False,
                "repeated": False,
            },
            {
                "at": "2026-03-29T01:00:00Z",
                "local": "2026-03-29T03:00:00+02:00",
                "shifted": True,
                "repeated": False,
                "wallTime": "2026-03-29T02:30",
            },
            {
                "at": "2026-03-30T00:30:00Z",
                "local": "2026-03-30T02:30:00+02:00",
                "shifted": False,
                "repeated": False,
            },
        ],
    }


async def test_preview_defaults_to_utc_now_and_ten(api: Api) -> None:
    body = (await preview(api, {"cron": "0 * * * *"})).json
    assert body["timezone"] == "UTC"
    assert body["from"] == "2026-01-01T00:00:00Z"
    assert [t["at"] for t in body["fireTimes"][:2]] == [
        "2026-01-01T01:00:00Z",
        "2026-01-01T02:00:00Z",
    ]
    assert len(body["fireTimes"]) == 10


async def test_preview_of_lord_howe_half_hour_fold_under_both(api: Api) -> None:
    body = (
        await preview(
            api,
            {
                "cron": "45 1 5 4 *",
                "timezone": "Australia/Lord_Howe",
                "dstFold": "both",
                "count": 2,
                "from": "2026-01-01T00:00:00Z",
            },
        )
    ).json
    assert [(t["local"], t.get("occurrence")) for t in body["fireTimes"]] == [
        ("2026-04-05T01:45:00+11:00", "first"),
        ("2026-04-05T01:45:00+10:30", "second"),
    ]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({}, "cron is required"),
        ([], "JSON object"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "* * * *"}, "5 fields"),
        ({"cron": "* * * * *", "timezone": "Nowhere/Land"}, "timezone"),
        ({"cron": "* * * * *", "count": 0}, "count"),
        ({"cron": "* * * * *", "count": 1000}, "count"),
        ({"cron": "* * * * *", "count": "3"}, "count"),
        ({"cron": "* * * * *", "count": True}, "count"),
        ({"cron": "* * * * *", "from": "yesterday"}, "from"),
        ({"cron": "* * * * *", "from": 5}, "from"),
        ({"cron": "* * * * *", "from": "9999-12-31T23:59:59Z"}, "within the calendar"),
        ({"cron": "* * * * *", "from": "0001-01-01T00:00:00Z"}, "within the calendar"),
        ({"cron": "* * * * *", "dstGap": "jump"}, "dstGap"),
        ({"cron": "* * * * *", "jitter": "1m"}, "unknown field(s): jitter"),
    ],
)
async def test_bad_preview_requests_are_400(api: Api, body: Any, fragment: str) -> None:
    (await preview(api, body)).assert_error(400, fragment)


async def test_preview_rejects_malformed_json_and_other_content_types(api: Api) -> None:
    reply = await api.request(
        "POST", "/cron/preview", data=b"{", headers={"Content-Type": "application/json"}
    )
    reply.assert_error(400, "malformed JSON")
    reply = await api.request(
        "POST", "/cron/preview", data=b"cron", headers={"Content-Type": "text/plain"}
    )
    reply.assert_error(415)
