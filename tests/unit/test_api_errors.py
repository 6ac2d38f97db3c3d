"""The one error table: what each project exception is answered with, and how the OpenAPI
document's statuses follow from the exceptions each operation declares."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from jobscheduler.api import create_app
from jobscheduler.api.errors import (
    STORE_UNAVAILABLE_MESSAGE,
    UNAUTHORIZED_MESSAGE,
    response_of,
    status_of,
)
from jobscheduler.api.route_table import table_of
from jobscheduler.clock import ManualClock
from jobscheduler.domain.model import new_job_id
from jobscheduler.errors import (
    ConfigError,
    DuplicateJob,
    Forbidden,
    InvalidTransition,
    JobNotFound,
    JobSchedulerError,
    KeyNotFound,
    QuotaExceeded,
    ServiceUnavailable,
    StoreError,
    Unauthorized,
    ValidationError,
)

from .api_support import Api, serve
from .conftest import BASE, DepsFactory

JOB = new_job_id()


@pytest.mark.parametrize(
    ("error", "status", "body", "headers"),
    [
        (ValidationError("priority: bad"), 400, {"error": "priority: bad"}, {}),
        (
            Unauthorized("key abc is revoked"),
            401,
            {"error": UNAUTHORIZED_MESSAGE},
            {"WWW-Authenticate": "Bearer"},
        ),
        (Forbidden("not yours"), 403, {"error": "not yours"}, {}),
        (JobNotFound("job x not found"), 404, {"error": "job x not found"}, {}),
        (KeyNotFound("key x not found"), 404, {"error": "key x not found"}, {}),
        (
            DuplicateJob("taken", existing_id=JOB),
            409,
            {"error": "taken", "jobId": JOB},
            {},
        ),
        (
            InvalidTransition("final", job_id=JOB, status="dlq"),
            409,
            {"error": "final", "jobId": JOB, "status": "dlq"},
            {},
        ),
        (
            QuotaExceeded("slow down", reason="rate", retry_after=7),
            429,
            {"error": "slow down"},
            {"Retry-After": "7"},
        ),
        (
            StoreError("disk on fire"),
            503,
            {"error": STORE_UNAVAILABLE_MESSAGE},
            {"Retry-After": "1"},
        ),
        (
            ServiceUnavailable("upstream"),
            503,
            {"error": STORE_UNAVAILABLE_MESSAGE},
            {"Retry-After": "1"},
        ),
        (ConfigError("no rule for me"), 500, {"error": "internal error"}, {}),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, JobSchedulerError) else None,
)
async def test_each_exception_is_answered_by_its_rule_or_its_ancestors(
    error: JobSchedulerError, status: int, body: dict[str, Any], headers: dict[str, str]
) -> None:
    response = response_of(error)
    assert response.status_code == status == status_of(type(error))
    assert response.content_type == "application/json"
    assert await response.get_json() == body
    for name, value in headers.items():
        assert response.headers[name] == value


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(make_deps(clock=ManualClock(BASE))) as served:
        yield served


async def test_the_document_lists_the_statuses_of_the_errors_an_operation_declares(
    api: Api,
) -> None:
    doc = (await api.get("/openapi.json")).json
    create = doc["paths"]["/jobs"]["post"]["responses"]
    assert "Retry-After" in create["429"]["headers"]
    assert create["409"]["content"]["application/json"]["schema"]["properties"]["jobId"]
    trigger = doc["paths"]["/jobs/{job_id}/trigger"]["post"]["responses"]["409"]
    alternatives = trigger["content"]["application/json"]["schema"]["anyOf"]
    assert [sorted(s["properties"]) for s in alternatives] == [
        ["error", "jobId", "status"],
        ["error", "jobId"],
    ]
    revoke = doc["paths"]["/keys/{key_id}"]["delete"]["responses"]["404"]
    assert revoke["description"] == "no such key (or one of another tenant)"
    assert "WWW-Authenticate" in create["401"]["headers"]


async def test_every_operation_and_page_declares_the_role_it_needs(
    make_deps: DepsFactory,
) -> None:
    app = create_app(make_deps(clock=ManualClock(BASE)))
    table = table_of(app)
    endpoints = {rule.endpoint for rule in app.url_map.iter_rules()}
    assert [e for e in sorted(endpoints) if table.access(e) is None] == []


async def test_an_unknown_query_parameter_of_a_declared_route_is_a_400_naming_it(
    api: Api,
) -> None:
    reply = await api.get("/audit", colour="red")
    message = reply.assert_error(400, "unknown query parameter(s): colour")
    assert "(accepted: tenantId, keyId, action, jobId, since, until, before, limit)" in message


async def test_a_route_that_ignores_unknown_query_parameters_still_does(api: Api) -> None:
    reply = await api.get(f"/jobs/{new_job_id()}", tenantId="tenant-a")
    reply.assert_error(404, "not found")
