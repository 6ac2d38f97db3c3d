"""Task handles (what ``@registry.handler`` returns) against httpx's MockTransport: what
``enqueue``/``enqueue_many`` send, local validation, retries of a 503 with the same key, and
one client per process."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from jobscheduler.errors import ApiUnreachable, DuplicateJob, ServiceUnavailable, ValidationError
from jobscheduler.handlers import HandlerRegistry, JobContext
from jobscheduler.handlers.tasks import MAX_BATCH, TaskHandle

from .client_support import assert_sent_one_create_due_now

URL = "http://jobs.test"
JOB_ID = "65f0a1b2c3d4e5f6a7b8c9d0"
SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}},
    "required": ["to"],
}

registry = HandlerRegistry()


@registry.handler("send-email", validate=SCHEMA, max_attempts=5)
async def send_email(ctx: JobContext) -> str:
    return "sent"


@registry.handler("crunch")
def crunch(ctx: JobContext) -> int:
    return 7


Answer = Callable[[httpx.Request], httpx.Response]


def connected(answer: Answer, **options: Any) -> tuple[list[httpx.Request], HandlerRegistry]:
    """A registry with send-email whose connection answers with ``answer``."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    mine = HandlerRegistry()
    mine.register("send-email", send_email.__wrapped__, validate=SCHEMA, max_attempts=5)
    mine.connect(URL, transport=httpx.MockTransport(handle), **options)
    return seen, mine


def handle_of(registry: HandlerRegistry) -> TaskHandle:
    return TaskHandle(registry, "send-email", send_email.__wrapped__)


def stored(request: httpx.Request, status: int = 201) -> httpx.Response:
    body = json.loads(request.content)
    return httpx.Response(status, json={"id": JOB_ID, "status": "pending", **body})


def test_the_decorated_function_is_still_callable_and_pickles_by_its_name() -> None:
    assert isinstance(crunch, TaskHandle)
    assert crunch(None) == 7  # type: ignore[arg-type]
    assert pickle.loads(pickle.dumps(crunch)) is crunch
    assert registry.get("crunch").func is crunch
    assert registry.get("crunch").run_in == "process"
    assert registry.get("send-email").run_in == "trio"


def test_enqueue_posts_the_job_due_now_with_a_fresh_key_and_returns_the_stored_job() -> None:
    seen, mine = connected(stored)
    job = handle_of(mine).enqueue({"to": "ada@example.com"}, tenant_id="acme", priority=2)
    assert job["id"] == JOB_ID
    assert_sent_one_create_due_now(
        seen,
        {
            "tenantId": "acme",
            "jobType": "send-email",
            "payload": {"to": "ada@example.com"},
            "priority": 2,
        },
    )


def test_a_bad_payload_is_refused_locally_with_the_apis_message_and_nothing_is_sent() -> None:
    seen, mine = connected(stored)
    with pytest.raises(ValidationError, match=r"^payload\.to: 42 is not of type 'string'$"):
        handle_of(mine).enqueue({"to": 42}, tenant_id="acme")
    with pytest.raises(ValidationError, match=r"^priority: must be between"):
        handle_of(mine).enqueue({"to": "a@b.c"}, tenant_id="acme", priority=10**9)
    with pytest.raises(ValidationError, match="give at or delay, not both"):
        handle_of(mine).enqueue({"to": "a@b.c"}, at="2030-01-01T00:00:00Z", delay=5)
    assert seen == []


def test_a_503_is_retried_with_the_same_key_and_a_409_then_returns_the_stored_job() -> None:
    answers = iter(["503", "409", "get"])

    def answer(request: httpx.Request) -> httpx.Response:
        step = next(answers)
        if step == "503":
            return httpx.Response(503, json={"error": "store timed out"})
        if step == "409":
            return httpx.Response(409, json={"error": "taken", "jobId": JOB_ID})
        return httpx.Response(200, json={"id": JOB_ID, "status": "pending"})

    seen, mine = connected(answer)
    job = handle_of(mine).enqueue({"to": "a@b.c"}, tenant_id="acme")
    assert job["id"] == JOB_ID
    first, second, read = seen
    assert json.loads(first.content) == json.loads(second.content)  # same key, same body
    assert (read.method, read.url.path) == ("GET", f"/jobs/{JOB_ID}")


def test_no_answer_is_retried_too_until_retry_for_runs_out() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    seen, mine = connected(refuse, retry_for=0.3)
    with pytest.raises(ApiUnreachable):
        handle_of(mine).enqueue({"to": "a@b.c"}, tenant_id="acme")
    assert len(seen) >= 2
    assert len({json.loads(r.content)["idempotencyKey"] for r in seen}) == 1


def test_a_key_already_taken_on_the_first_try_is_a_duplicate_job() -> None:
    _, mine = connected(lambda r: httpx.Response(409, json={"error": "taken", "jobId": JOB_ID}))
    with pytest.raises(DuplicateJob) as caught:
        handle_of(mine).enqueue({"to": "a@b.c"}, tenant_id="acme", key="welcome-ada")
    assert caught.value.existing_id == JOB_ID


def test_a_503_that_outlasts_retry_for_is_raised() -> None:
    _, mine = connected(lambda r: httpx.Response(503, json={"error": "down"}), retry_for=0)
    with pytest.raises(ServiceUnavailable):
        handle_of(mine).enqueue({"to": "a@b.c"}, tenant_id="acme")


def test_the_tenant_defaults_to_jobscheduler_tenant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBSCHEDULER_TENANT", "from-env")
    seen, mine = connected(stored)
    handle_of(mine).enqueue({"to": "a@b.c"})
    assert json.loads(seen[0].content)["tenantId"] == "from-env"


def test_one_client_serves_every_call_of_the_process() -> None:
    _, mine = connected(stored)
    handle = handle_of(mine)
    handle.enqueue({"to": "a@b.c"}, tenant_id="acme")
    first = mine.connection.client()
    handle.enqueue({"to": "a@b.c"}, tenant_id="acme")
    assert mine.connection.client() is first


def test_enqueue_many_sends_batches_of_at_most_the_api_limit_and_answers_in_order() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        jobs = json.loads(request.content)["jobs"]
        results = [{"status": 201, "job": {"id": b["idempotencyKey"]}} for b in jobs]
        return httpx.Response(200, json={"results": results})

    seen, mine = connected(answer)
    payloads = [{"to": f"user{i}@example.com"} for i in range(MAX_BATCH + 5)]
    answers = handle_of(mine).enqueue_many(payloads, tenant_id="acme")
    assert [len(json.loads(r.content)["jobs"]) for r in seen] == [MAX_BATCH, 5]
    sent = [b for r in seen for b in json.loads(r.content)["jobs"]]
    assert [a["job"]["id"] for a in answers] == [b["idempotencyKey"] for b in sent]
    assert [b["payload"] for b in sent] == payloads


def test_enqueue_many_refuses_a_bad_item_by_its_index_before_sending_anything() -> None:
    seen, mine = connected(stored)
    with pytest.raises(ValidationError, match=r"^jobs\[1\]: payload\.to: 42 is not of type"):
        handle_of(mine).enqueue_many([{"to": "a@b.c"}, {"to": 42}], tenant_id="acme")
    assert seen == []


async def test_enqueue_async_sends_the_same_request_under_trio() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return stored(request)

    mine = HandlerRegistry()
    handle_ = mine.register("send-email", send_email.__wrapped__, validate=SCHEMA)
    mine.connect(URL, async_transport=httpx.MockTransport(handle))
    job = await handle_.enqueue_async({"to": "a@b.c"}, tenant_id="acme", delay="30s")
    assert job["jobType"] == "send-email"
    assert json.loads(seen[0].content)["tenantId"] == "acme"
    assert mine.connection.async_client() is mine.connection.async_client()
    await mine.connection.aclose()
