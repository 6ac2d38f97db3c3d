"""jobscheduler.client without a server: requests are answered by httpx's MockTransport, so
these tests pin what each method sends and how each answer (errors included) is read."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import trio
from trio.testing import MockClock

from jobscheduler.client import AsyncClient, Client, job_body
from jobscheduler.errors import (
    ApiError,
    ApiUnreachable,
    DuplicateJob,
    Forbidden,
    InvalidTransition,
    JobNotFound,
    JobSchedulerError,
    RateLimited,
    ServiceUnavailable,
    Unauthorized,
    ValidationError,
    WaitTimeout,
)

from .client_support import assert_sent_one_create_due_now
from .conftest import DepsFactory

URL = "http://jobs.test"
JOB_ID = "65f0a1b2c3d4e5f6a7b8c9d0"
Handler = Callable[[httpx.Request], httpx.Response]


def job(status: str = "pending", **fields: Any) -> dict[str, Any]:
    return {"id": JOB_ID, "tenantId": "acme", "jobType": "noop", "status": status, **fields}


def recording(answer: Handler) -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    return seen, httpx.MockTransport(handle)


def test_create_sends_a_due_now_job_with_a_fresh_key_and_returns_the_stored_job() -> None:
    seen, transport = recording(lambda r: httpx.Response(201, json=job()))
    with Client(URL, transport=transport) as client:
        created = client.create("noop", tenant_id="acme", payload={"n": 1}, priority=3)
    assert created["id"] == JOB_ID
    assert_sent_one_create_due_now(
        seen,
        {"tenantId": "acme", "jobType": "noop", "payload": {"n": 1}, "priority": 3},
    )


def test_job_body_of_a_template_has_cron_and_its_schedule_settings_but_no_scheduled_at() -> None:
    body = job_body(
        "noop", tenant_id="acme", cron="0 2 * * *", idempotency_key="nightly", timezone="UTC"
    )
    assert body == {
        "idempotencyKey": "nightly",
        "tenantId": "acme",
        "jobType": "noop",
        "cron": "0 2 * * *",
        "timezone": "UTC",
    }


def test_a_naive_datetime_is_refused_before_anything_is_sent() -> None:
    from datetime import datetime

    with pytest.raises(ValueError, match="timezone-aware"):
        job_body("noop", tenant_id="acme", scheduled_at=datetime(2026, 1, 1))


def test_url_and_key_come_from_the_environment_unless_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBSCHEDULER_URL", "http://env.test:9000/")
    monkeypatch.setenv("JOBSCHEDULER_API_KEY", "sk-env")
    seen, transport = recording(lambda r: httpx.Response(200, json=job()))
    with Client(transport=transport) as client:
        client.get(JOB_ID)
    with Client(URL, api_key="sk-arg", transport=transport) as client:
        client.get(JOB_ID)
    assert str(seen[0].url) == f"http://env.test:9000/jobs/{JOB_ID}"
    assert seen[0].headers["Authorization"] == "Bearer sk-env"
    assert str(seen[1].url).startswith(URL)
    assert seen[1].headers["Authorization"] == "Bearer sk-arg"


def test_without_a_key_no_authorization_header_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBSCHEDULER_API_KEY", raising=False)
    seen, transport = recording(lambda r: httpx.Response(200, json=job()))
    with Client(URL, transport=transport) as client:
        client.get(JOB_ID)
    assert "Authorization" not in seen[0].headers


@pytest.mark.parametrize(
    ("status", "body", "headers", "error"),
    [
        (400, {"error": "priority: must be an integer"}, {}, ValidationError),
        (401, {"error": "no key"}, {}, Unauthorized),
        (403, {"error": "reader may not"}, {}, Forbidden),
        (404, {"error": "job x not found"}, {}, JobNotFound),
        (
            409,
            {"error": "job is completed", "jobId": JOB_ID, "status": "completed"},
            {},
            InvalidTransition,
        ),
        (413, {"error": "too large"}, {}, ValidationError),
        (415, {"error": "json only"}, {}, ValidationError),
        (429, {"error": "slow down"}, {"Retry-After": "3"}, RateLimited),
        (503, {"error": "store down"}, {"Retry-After": "1"}, ServiceUnavailable),
        (500, {"error": "internal error"}, {}, ApiError),
    ],
)
def test_each_error_status_raises_its_own_exception_with_the_servers_message(
    status: int, body: dict[str, Any], headers: dict[str, str], error: type[Exception]
) -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(status, json=body, headers=headers))
    with Client(URL, transport=transport) as client, pytest.raises(error) as caught:
        client.cancel(JOB_ID)
    assert str(caught.value) == body["error"]
    assert isinstance(caught.value, JobSchedulerError)
    if isinstance(caught.value, RateLimited | ServiceUnavailable):
        assert caught.value.retry_after == float(headers["Retry-After"])
    if isinstance(caught.value, InvalidTransition):
        assert (caught.value.job_id, caught.value.status) == (JOB_ID, "completed")
    if isinstance(caught.value, ApiError):
        assert caught.value.status == 500


def test_a_409_on_create_is_a_duplicate_carrying_the_existing_job_id() -> None:
    answer = {"error": "idempotencyKey 'k' is already used", "jobId": JOB_ID}
    transport = httpx.MockTransport(lambda r: httpx.Response(409, json=answer))
    with Client(URL, transport=transport) as client, pytest.raises(DuplicateJob) as caught:
        client.create("noop", tenant_id="acme", idempotency_key="k")
    assert caught.value.existing_id == JOB_ID


def test_an_error_without_a_json_body_still_names_the_status() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(502, text="<html>bad gateway"))
    with Client(URL, transport=transport) as client, pytest.raises(ApiError, match="HTTP 502"):
        client.get(JOB_ID)


def test_an_unreachable_api_is_api_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with (
        Client(URL, transport=httpx.MockTransport(refuse)) as client,
        pytest.raises(ApiUnreachable, match="connection refused"),
    ):
        client.get(JOB_ID)


def test_list_follows_the_link_cursor_across_pages_with_the_filters_in_the_query() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if "cursor" not in request.url.params:
            link = f'<{URL}/jobs?tenantId=acme&cursor=abc>; rel="next"'
            return httpx.Response(200, json=[job(id="1"), job(id="2")], headers={"Link": link})
        return httpx.Response(200, json=[job(id="3")])

    seen, transport = recording(answer)
    with Client(URL, transport=transport) as client:
        ids = [j["id"] for j in client.list("acme", status=["dlq", "cancelled"], cron=False)]
    assert ids == ["1", "2", "3"]
    first = seen[0].url.params
    assert first.get_list("status") == ["dlq", "cancelled"]
    assert (first["tenantId"], first["cron"]) == ("acme", "false")
    assert seen[1].url.params["cursor"] == "abc"


@pytest.mark.parametrize(
    ("call", "method", "path", "body"),
    [
        (lambda c: c.cancel(JOB_ID), "POST", f"/jobs/{JOB_ID}/cancel", {}),
        (
            lambda c: c.retry(JOB_ID, payload={"n": 2}),
            "POST",
            f"/jobs/{JOB_ID}/retry",
            {"payload": {"n": 2}},
        ),
        (lambda c: c.pause(JOB_ID), "POST", f"/jobs/{JOB_ID}/pause", {}),
        (lambda c: c.resume(JOB_ID), "POST", f"/jobs/{JOB_ID}/resume", {}),
        (lambda c: c.trigger(JOB_ID), "POST", f"/jobs/{JOB_ID}/trigger", {}),
        (
            lambda c: c.update(JOB_ID, cron="*/5 * * * *", max_attempts=2),
            "PATCH",
            f"/jobs/{JOB_ID}",
            {"cron": "*/5 * * * *", "maxAttempts": 2},
        ),
        (lambda c: c.delete(JOB_ID), "DELETE", f"/jobs/{JOB_ID}", None),
        (
            lambda c: c.bulk_retry("acme", status="dlq", job_type="noop"),
            "POST",
            "/jobs/retry",
            {"filter": {"tenantId": "acme", "status": ["dlq"], "jobType": "noop"}},
        ),
        (lambda c: c.bulk_cancel("acme"), "POST", "/jobs/cancel", {"filter": {"tenantId": "acme"}}),
        (lambda c: c.stats("acme"), "GET", "/stats", None),
        (lambda c: c.next(JOB_ID, 3), "GET", f"/jobs/{JOB_ID}/next", None),
        (
            lambda c: c.preview("0 2 * * *", timezone="Europe/Paris"),
            "POST",
            "/cron/preview",
            {"cron": "0 2 * * *", "timezone": "Europe/Paris"},
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and not v.startswith("/") else None,
)
def test_each_action_sends_its_route_and_body(
    call: Callable[[Client], Any], method: str, path: str, body: dict[str, Any] | None
) -> None:
    seen, transport = recording(lambda r: httpx.Response(200, json=job()))
    with Client(URL, transport=transport) as client:
        call(client)
    (request,) = seen
    assert (request.method, request.url.path) == (method, path)
    assert (json.loads(request.content) if request.content else None) == body


def test_wait_polls_until_the_job_is_final() -> None:
    states = iter(["pending", "running", "completed"])
    seen, transport = recording(lambda r: httpx.Response(200, json=job(next(states))))
    with Client(URL, transport=transport) as client:
        assert client.wait(JOB_ID, timeout=10, interval=0)["status"] == "completed"
    assert len(seen) == 3


def test_wait_gives_up_with_wait_timeout_naming_the_last_status() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json=job("running")))
    with (
        Client(URL, transport=transport) as client,
        pytest.raises(WaitTimeout, match="still running after 0s"),
    ):
        client.wait(JOB_ID, timeout=0)


async def test_async_client_under_trio_waits_in_virtual_time(autojump_clock: MockClock) -> None:
    polls: list[float] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        polls.append(trio.current_time())
        return httpx.Response(200, json=job("completed" if len(polls) == 5 else "running"))

    async with AsyncClient(URL, transport=httpx.MockTransport(answer)) as client:
        done = await client.wait(JOB_ID, timeout=60, interval=2)
        assert done["status"] == "completed"
        polls.clear()
        with pytest.raises(WaitTimeout):
            await client.wait(JOB_ID, timeout=3, interval=2)
    assert len(polls) == 3  # at 0, 2 and 3 virtual seconds


async def test_async_client_pages_and_errors_match_the_sync_client() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/jobs":
            return httpx.Response(200, json=[job(id="1")])
        return httpx.Response(404, json={"error": "job nope not found"})

    async with AsyncClient(URL, transport=httpx.MockTransport(answer)) as client:
        assert [j["id"] async for j in client.list("acme")] == ["1"]
        with pytest.raises(JobNotFound, match="not found"):
            await client.get(JOB_ID)


async def test_both_clients_read_a_ledger_across_its_pages() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if "cursor" in request.url.params:
            return httpx.Response(200, json={"id": JOB_ID, "occurrences": [{"fireAt": "b"}]})
        link = f'<{URL}/jobs/{JOB_ID}/occurrences?limit=1&cursor=x>; rel="next"'
        page = {"id": JOB_ID, "occurrences": [{"fireAt": "a"}]}
        return httpx.Response(200, json=page, headers={"Link": link})

    transport = httpx.MockTransport(answer)
    async with AsyncClient(URL, transport=transport) as client:
        fired = [o["fireAt"] async for o in client.occurrences(JOB_ID, page_size=1)]
    assert fired == ["a", "b"]
    with Client(URL, transport=transport) as sync:
        assert [o["fireAt"] for o in sync.occurrences(JOB_ID, page_size=1)] == ["a", "b"]


def test_async_client_runs_under_asyncio_too() -> None:
    async def main() -> str:
        transport = httpx.MockTransport(lambda r: httpx.Response(201, json=job()))
        async with AsyncClient(URL, transport=transport) as client:
            created = await client.create("noop", tenant_id="acme")
            return created["id"]

    assert asyncio.run(main()) == JOB_ID


def test_async_client_has_each_client_method_with_the_same_parameters_and_docstring() -> None:
    import inspect

    def public(cls: type) -> dict[str, Any]:
        return {n: m for n, m in vars(cls).items() if callable(m) and not n.startswith("_")}

    blocking, coroutines = public(Client), public(AsyncClient)
    assert set(coroutines) == set(blocking) - {"close"} | {"aclose"}
    for name in set(blocking) - {"close"}:
        sync_method, async_method = blocking[name], coroutines[name]
        assert (
            inspect.signature(async_method).parameters == inspect.signature(sync_method).parameters
        ), name
        assert async_method.__doc__ == sync_method.__doc__, name


#: Client methods that are not one operation: ``pages`` reads ``list``'s pages, ``wait``
#: polls ``get``, ``create_or_get`` creates (and gets the job holding the key when taken).
NOT_AN_OPERATION = {
    "pages": "list",
    "wait": "get",
    "create_or_get": "create",
    "workflow_pages": "list_workflows",
    "wait_workflow": "get_workflow",
}


async def test_each_client_method_sends_the_api_operation_of_its_name_and_says_what_it_returns(
    make_deps: DepsFactory,
) -> None:
    import inspect

    from jobscheduler.api import create_app
    from jobscheduler.api.route_table import table_of
    from jobscheduler.client import _operations, _workflows

    operations = {op.id: op for op in table_of(create_app(make_deps())).registered()}
    placeholders = {
        "job_id": JOB_ID,
        "workflow_id": JOB_ID,
        "job_type": "noop",
        "cron": "* * * * *",
        "bodies": [],
        "steps": [],
        "tenant_id": "acme",
        "weight": 2,
        "url": "https://hooks.example.com/x",
        "events": ["job.dlq"],
        "webhook_id": JOB_ID,
    }
    methods = {n for n, m in vars(Client).items() if callable(m) and not n.startswith("_")}
    for name in sorted(methods - {"close"}):
        function = (
            getattr(_operations, name, None)
            or getattr(_operations, f"{name}_", None)
            or getattr(_workflows, name)
        )
        parameters = inspect.signature(function).parameters.values()
        required = [p for p in parameters if p.default is inspect.Parameter.empty]
        arguments = [placeholders[p.name] for p in required if p.kind is p.POSITIONAL_OR_KEYWORD]
        keywords = {p.name: "k" for p in required if p.kind is p.KEYWORD_ONLY}
        built = function(*arguments, **keywords)
        # wait polls with a Poll's call; create_or_get first sends its plan's create.
        polls = {"wait": "call", "wait_workflow": "call", "create_or_get": "create"}
        call = getattr(built, polls.get(name, ""), built)
        op = operations[NOT_AN_OPERATION.get(name, name)]
        path = op.path
        for param in ("job_id", "workflow_id", "job_type", "tenant_id", "webhook_id"):
            path = path.replace(f"{{{param}}}", str(placeholders[param]))
        assert (call.method, call.path) == (op.method, path), name
        # The API answers an object around the array the method returns: its doc says so.
    for name, field in (("attempts", "attempts"), ("create_many", "results")):
        assert f"``{field}`` array of the API's answer" in (getattr(Client, name).__doc__ or "")
