"""The ``http`` job's payload contract, checked at ``POST /jobs``: a bad payload is a 400
with a message naming the field, never a job that fails later."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobscheduler.api import create_app
from jobscheduler.errors import ValidationError
from jobscheduler.handlers.http import MAX_TIMEOUT_MS, validate_http

from .conftest import DepsFactory

URL = "https://hooks.example.com/notify"


@pytest.mark.parametrize(
    "payload",
    [
        {"url": URL},
        {"url": "http://example.com:8080/x?y=1#z"},
        {"url": URL, "method": "put", "json": {"a": [1, 2]}},
        {"url": URL, "json": None},
        {"url": URL, "method": "DELETE", "body": "raw text"},
        {"url": URL, "method": "GET", "headers": {"X-Token": "abc", "Accept": "*/*"}},
        {"url": URL, "timeoutMs": 1},
        {"url": URL, "timeoutMs": MAX_TIMEOUT_MS},
        {"url": URL, "timeoutMs": 2500.0},
        {"url": URL, "expectStatus": 204},
        {"url": URL, "expectStatus": [200, 202, 302]},
        # Internal addresses are a matter for the executor's guard (HTTP_ALLOWLIST), not
        # for the payload's shape: they are refused when the job runs.
        {"url": "http://169.254.169.254/latest/meta-data/"},
    ],
)
def test_valid_payloads_pass(payload: dict[str, Any]) -> None:
    validate_http(payload)


BAD: list[tuple[dict[str, Any], str]] = [
    ({}, "payload.url: required string"),
    ({"url": ""}, "payload.url: required string"),
    ({"url": 42}, "payload.url: required string"),
    ({"url": "ftp://example.com/file"}, "only http and https"),
    ({"url": "file:///etc/passwd"}, "only http and https"),
    ({"url": "gopher://127.0.0.1:25/"}, "only http and https"),
    ({"url": "//example.com/x"}, "only http and https"),
    ({"url": "http:///path-only"}, "needs a host"),
    ({"url": "https://user:pass@example.com/"}, "credentials in the URL"),
    ({"url": "https://token@example.com/"}, "credentials in the URL"),
    ({"url": "http://exa mple.com/"}, "spaces or control characters"),
    ({"url": "http://example.com/\r\nX: y"}, "spaces or control characters"),
    ({"url": "http://0177.0.0.1/"}, "not a valid URL"),
    ({"url": "https://" + "a" * 2100 + ".com/"}, "longer than 2048"),
    ({"url": URL, "method": "TRACE"}, "payload.method: one of GET"),
    ({"url": URL, "method": "CONNECT"}, "payload.method"),
    ({"url": URL, "method": 1}, "payload.method"),
    ({"url": URL, "headers": ["X: y"]}, "payload.headers: must be an object"),
    ({"url": URL, "headers": {"X-A": 1}}, "payload.headers.X-A: must be a string"),
    ({"url": URL, "headers": {"X-A": "a\r\nInjected: 1"}}, "must not contain CR, LF"),
    ({"url": URL, "headers": {"X-A": "a\nb"}}, "must not contain CR, LF"),
    ({"url": URL, "headers": {"Bad Name": "x"}}, "not a valid header name"),
    ({"url": URL, "headers": {"X\r\nY": "x"}}, "not a valid header name"),
    ({"url": URL, "headers": {"Host": "internal"}}, "set by the client itself"),
    ({"url": URL, "headers": {"Transfer-Encoding": "chunked"}}, "set by the client itself"),
    ({"url": URL, "headers": {f"X-{i}": "v" for i in range(51)}}, "at most 50 headers"),
    ({"url": URL, "json": {}, "body": "x"}, "json or body, not both"),
    ({"url": URL, "body": {"a": 1}}, "payload.body: must be a string"),
    ({"url": URL, "method": "GET", "json": {"a": 1}}, "GET request carries no json or body"),
    ({"url": URL, "method": "head", "body": "x"}, "HEAD request carries no json or body"),
    ({"url": URL, "timeoutMs": 0}, "payload.timeoutMs: an integer between 1 and 300000"),
    ({"url": URL, "timeoutMs": MAX_TIMEOUT_MS + 1}, "payload.timeoutMs"),
    ({"url": URL, "timeoutMs": "5s"}, "payload.timeoutMs"),
    ({"url": URL, "timeoutMs": True}, "payload.timeoutMs"),
    ({"url": URL, "timeoutMs": 1.5}, "payload.timeoutMs"),
    ({"url": URL, "expectStatus": 99}, "payload.expectStatus"),
    ({"url": URL, "expectStatus": 600}, "payload.expectStatus"),
    ({"url": URL, "expectStatus": []}, "payload.expectStatus"),
    ({"url": URL, "expectStatus": [200, "201"]}, "payload.expectStatus"),
    ({"url": URL, "expectStatus": True}, "payload.expectStatus"),
    ({"url": URL, "timeout": 5}, "unknown field 'timeout'"),
]


@pytest.mark.parametrize(("payload", "fragment"), BAD)
def test_invalid_payloads_are_rejected_naming_the_problem(
    payload: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ValidationError) as info:
        validate_http(payload)
    assert fragment in str(info.value)


def create_body(payload: Any) -> dict[str, Any]:
    return {
        "idempotencyKey": "webhook-1",
        "tenantId": "tenant-a",
        "jobType": "http",
        "payload": payload,
        "scheduledAt": "2026-09-29T18:00:00Z",
    }


async def post(make_deps: DepsFactory, body: dict[str, Any]) -> tuple[int, Any]:
    app = create_app(make_deps())
    async with app.test_app() as test_app:
        response = await test_app.test_client().post("/jobs", json=body)
        return response.status_code, json.loads(await response.get_data(as_text=True))


async def test_post_jobs_answers_400_for_a_credentialed_url(make_deps: DepsFactory) -> None:
    status, body = await post(make_deps, create_body({"url": "https://u:p@example.com/"}))
    assert status == 400
    assert list(body) == ["error"]
    assert "credentials in the URL" in body["error"]


async def test_post_jobs_answers_400_for_a_header_with_a_newline(make_deps: DepsFactory) -> None:
    payload = {"url": URL, "headers": {"X-A": "1\r\nX-B: 2"}}
    status, body = await post(make_deps, create_body(payload))
    assert status == 400
    assert "payload.headers.X-A" in body["error"]


async def test_post_jobs_accepts_a_valid_webhook(make_deps: DepsFactory) -> None:
    payload = {"url": URL, "json": {"event": "signup"}, "expectStatus": [200, 202]}
    status, body = await post(make_deps, create_body(payload))
    assert status == 201
    assert body["jobType"] == "http"
    assert body["payload"] == payload
