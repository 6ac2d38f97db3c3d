"""Failure notifications on a real ``jobscheduler dev``: a webhook registered over the API
receives a signed ``job.dlq`` delivery at a local receiver the test starts on 127.0.0.1
(allowlisted), retried after a 500; and a delivery still pending when ``dev`` is killed
(``kill -9``) is sent by the restarted one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
import trio

from jobscheduler.domain.notifications import verify_signature
from tests.support.dev_server import DevServer
from tests.support.receiver import Received, Receiver, receiver

from .conftest import wait_for_job

pytestmark = pytest.mark.e2e

Factory = Callable[..., Awaitable[DevServer]]
Body = Callable[..., dict[str, Any]]

#: The first retry of a delivery comes 5 s after a failed try.
DELIVERY_BOUND = 30.0


@pytest.fixture
async def hooks() -> AsyncIterator[Receiver]:
    async with receiver() as running:
        yield running


async def register(client: httpx.AsyncClient, dev: DevServer, url: str) -> dict[str, Any]:
    reply = await client.post(
        f"{dev.url}/webhooks",
        json={"tenantId": "tenant-e2e", "url": url, "events": ["job.dlq"], "name": "e2e"},
    )
    assert reply.status_code == 201, reply.text
    created: dict[str, Any] = reply.json()
    return created


async def dead_letter(client: httpx.AsyncClient, dev: DevServer, job_body: Body) -> str:
    body = job_body(jobType="flaky", payload={"failRate": 1.0}, maxAttempts=1)
    reply = await client.post(f"{dev.url}/jobs", json=body)
    assert reply.status_code == 201, reply.text
    job_id: str = reply.json()["id"]
    await wait_for_job(client, dev, job_id, lambda j: j["status"] == "dlq")
    return job_id


async def received(hooks: Receiver, count: int, path: str = "/hooks/dlq") -> list[Received]:
    with trio.move_on_after(DELIVERY_BOUND):
        while len(hooks.to(path)) < count:
            await trio.sleep(0.05)
    return hooks.to(path)


async def deliveries(client: httpx.AsyncClient, dev: DevServer, hook_id: str) -> list[Any]:
    reply = await client.get(f"{dev.url}/webhooks/{hook_id}/deliveries")
    assert reply.status_code == 200, reply.text
    found: list[Any] = reply.json()["deliveries"]
    return found


async def settled_delivery(
    client: httpx.AsyncClient, dev: DevServer, hook_id: str, attempts: int
) -> dict[str, Any]:
    """The hook's one delivery once it records ``attempts`` tries: the receiver sees a try
    before the sender has read the answer and written it down."""
    with trio.move_on_after(DELIVERY_BOUND):
        while True:
            [delivery] = await deliveries(client, dev, hook_id)
            if delivery["attempts"] >= attempts:
                break
            await trio.sleep(0.05)
    found: dict[str, Any] = delivery
    return found


async def test_a_dead_letter_reaches_the_webhook_signed_after_a_retry(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body, hooks: Receiver
) -> None:
    dev = await dev_factory(HTTP_ALLOWLIST="127.0.0.1", NOTIFY_INTERVAL="100ms")
    hook = await register(client, dev, f"{hooks.base}/hooks/dlq")
    hooks.statuses = [500]
    job_id = await dead_letter(client, dev, job_body)

    first, second = await received(hooks, 2)
    assert first.body == second.body  # a retry sends the same bytes ...
    assert first.headers["x-jobscheduler-delivery"] == second.headers["x-jobscheduler-delivery"]
    header = second.headers["x-jobscheduler-signature"]
    signed_at = int(header.split(",")[0].removeprefix("t="))
    assert verify_signature(hook["secret"], header, second.body, now=signed_at)
    event = json.loads(second.body)
    assert event["type"] == "job.dlq"
    assert event["tenantId"] == "tenant-e2e"
    assert event["data"]["job"]["id"] == job_id
    assert event["data"]["job"]["status"] == "dlq"

    delivery = await settled_delivery(client, dev, hook["id"], 2)
    assert delivery["status"] == "delivered"
    assert delivery["attempts"] == 2
    assert delivery["lastStatus"] == 200


async def test_a_pending_delivery_survives_kill_9_and_is_sent_after_the_restart(
    dev_factory: Factory, client: httpx.AsyncClient, job_body: Body, hooks: Receiver
) -> None:
    env = {"HTTP_ALLOWLIST": "127.0.0.1", "NOTIFY_INTERVAL": "100ms"}
    dev = await dev_factory(**env)
    hook = await register(client, dev, f"{hooks.base}/hooks/dlq")
    hooks.statuses = [503]
    await dead_letter(client, dev, job_body)
    [failed_try] = await received(hooks, 1)
    pending = await settled_delivery(client, dev, hook["id"], 1)
    assert (pending["status"], pending["attempts"]) == ("pending", 1)

    dev.kill()  # before its retry, 5 s later
    restarted = await dev_factory(SQLITE_PATH=str(dev.db_path), **env)
    _, retried = await received(hooks, 2)
    assert (
        retried.headers["x-jobscheduler-delivery"] == failed_try.headers["x-jobscheduler-delivery"]
    )
    delivered = await settled_delivery(client, restarted, hook["id"], 2)
    assert (delivered["status"], delivered["attempts"]) == ("delivered", 2)
