"""Flow control on a real ``dev``: a per-key concurrency limit of 1 holds, checked from the
attempt records (no two attempts of one key overlap), and a held job says why."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Awaitable, Callable
from datetime import datetime

import httpx
import pytest
import trio

from tests.support.dev_server import DevServer

pytestmark = pytest.mark.e2e

KEYS = 5
PER_KEY = 6


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_a_per_key_limit_of_one_never_has_two_running_for_one_key(
    dev_factory: Callable[..., Awaitable[DevServer]], client: httpx.AsyncClient
) -> None:
    server = await dev_factory()
    put = await client.put(
        f"{server.url}/flow/limits/slow", params={"tenantId": "t-keyed"}, json={"concurrency": 1}
    )
    assert put.status_code == 200, put.text
    assert put.json()["effective"] == {"concurrency": 1}
    await trio.sleep(1.5)  # the leader reads the overrides every second
    bodies = [
        {
            "idempotencyKey": f"keyed-{i}",
            "tenantId": "t-keyed",
            "jobType": "slow",
            "concurrencyKey": f"customer-{i % KEYS}",
            "payload": {"sleepMs": 150},
            "scheduledAt": "2026-01-01T00:00:00Z",
        }
        for i in range(KEYS * PER_KEY)
    ]
    created = await client.post(f"{server.url}/jobs/batch", json={"jobs": bodies})
    assert created.status_code in (200, 201, 207), created.text
    # While keys are busy, a pending job says why.
    held: set[str] = set()
    jobs: list[dict[str, object]] = []
    with trio.fail_after(60):
        while True:
            jobs = (await client.get(f"{server.url}/jobs", params={"tenantId": "t-keyed"})).json()
            pending = [j for j in jobs if j["status"] == "pending"]
            for job in pending[:3]:
                answer = (await client.get(f"{server.url}/jobs/{job['id']}")).json()
                if answer.get("held"):
                    held.add(str(answer["held"]))
            if all(j["status"] == "completed" for j in jobs) and len(jobs) == len(bodies):
                break
            await trio.sleep(0.1)
    assert held, "no pending job said why it waited"
    assert all(text.endswith("has 1 of 1 running") for text in held), held
    spans: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for job in jobs:
        answer = (await client.get(f"{server.url}/jobs/{job['id']}/attempts")).json()
        for attempt in answer["attempts"]:
            spans[str(job["concurrencyKey"])].append(
                (_at(attempt["startedAt"]), _at(attempt["finishedAt"]))
            )
    assert len(spans) == KEYS
    for key, runs in spans.items():
        runs.sort()
        assert len(runs) == PER_KEY
        for (_, end), (start, _) in itertools.pairwise(runs):
            assert start >= end, f"{key}: an attempt started at {start} before {end}"
    # Other keys ran meanwhile: the limit is per key, not one at a time overall.
    firsts = sorted(runs[0][0] for runs in spans.values())
    assert firsts[-1] < min(runs[-1][1] for runs in spans.values())
