"""The route table: every route is declared, the OpenAPI document is produced from the
declarations, and request bodies are validated with the schemas the document publishes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import fastjsonschema
import pytest
from quart import Response

from jobscheduler.api import create_app
from jobscheduler.api.bodies import compile_body_validator
from jobscheduler.api.route_table import Operation, Reply, table_of
from jobscheduler.api.schemas import jobs as api_schemas
from jobscheduler.clock import ManualClock
from jobscheduler.domain.keys import Role
from jobscheduler.errors import ValidationError

from .api_support import Api, create_body, serve
from .conftest import BASE, DepsFactory


@pytest.fixture
async def api(make_deps: DepsFactory) -> AsyncIterator[Api]:
    async with serve(make_deps(clock=ManualClock(BASE))) as served:
        yield served


async def test_every_route_of_the_app_has_a_declaration(make_deps: DepsFactory) -> None:
    app = create_app(make_deps(clock=ManualClock(BASE)))
    assert table_of(app).undeclared() == []


async def test_a_route_registered_without_a_declaration_is_reported(
    make_deps: DepsFactory,
) -> None:
    app = create_app(make_deps(clock=ManualClock(BASE)))

    @app.delete("/jobs/<job_id>/forgotten")
    async def forgotten(job_id: str) -> Response:
        return Response("", 204)

    assert table_of(app).undeclared() == ["DELETE /jobs/<job_id>/forgotten"]


async def test_openapi_document_lists_every_route_with_its_responses(api: Api) -> None:
    reply = await api.get("/openapi.json")
    assert reply.status == 200
    doc = reply.json
    assert doc["openapi"] == "3.1.0"
    operations = {
        (method.upper(), path): op
        for path, item in doc["paths"].items()
        for method, op in item.items()
    }
    app = create_app(api.deps)
    for rule in table_of(app).api_rules():
        path = rule.rule.replace("<", "{").replace(">", "}")
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}:
            assert (method, path) in operations, f"{method} {path} missing from the document"
    create = operations[("POST", "/jobs")]
    assert create["requestBody"]["content"]["application/json"]["schema"] is not None
    assert set(create["responses"]) >= {"201", "400", "409", "413", "415", "503"}
    error = create["responses"]["400"]["content"]["application/json"]["schema"]
    assert error["required"] == ["error"]
    assert "Retry-After" in create["responses"]["503"]["headers"]
    listing = operations[("GET", "/jobs")]
    assert "Link" in listing["responses"]["200"]["headers"]
    assert {p["name"] for p in listing["parameters"]} >= {"tenantId", "status", "limit"}
    get = operations[("GET", "/jobs/{job_id}")]
    assert get["parameters"][0]["in"] == "path"
    assert "404" in get["responses"]


async def test_openapi_document_publishes_the_schema_create_requests_are_validated_with(
    api: Api,
) -> None:
    doc = (await api.get("/openapi.json")).json
    published = doc["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert published["schema"] == api_schemas.create_schema(api.deps.registry.names())
    assert "log-message" in published["schema"]["properties"]["jobType"]["enum"]
    # The published schema accepts the contract's example and rejects what the API rejects.
    validate = fastjsonschema.compile(published["schema"])
    validate(create_body())
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        validate(create_body(priority="high"))
    reply = await api.create(create_body(priority="high"))
    reply.assert_error(400, "priority: must be an integer")


async def test_openapi_document_needs_no_key_and_says_keys_are_bearer(api: Api) -> None:
    doc = (await api.get("/openapi.json")).json
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert doc["paths"]["/openapi.json"]["get"]["security"] == []
    assert {"bearerAuth": []} in doc["paths"]["/jobs"]["post"]["security"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "name is required"),
        ({"name": 5}, "name: must be a string"),
        ({"name": ""}, "name: must not be empty"),
        ({"name": "x", "extra": 1, "more": 2}, "unknown field(s): extra, more"),
        ({"name": "x", "size": 11}, "size: must be at most 10"),
        ({"name": "x", "size": 0}, "size: must be at least 1"),
        ({"name": "x", "size": 2.5}, "size: must be an integer"),
        ({"name": "x", "mode": "loud"}, "mode: unknown value 'loud' (known: quiet, calm)"),
        ({"name": "x", "inner": {"deep": True}}, "inner.deep: must be a string"),
        ([], "request body must be a JSON object"),
    ],
)
def test_schema_violations_are_worded_as_one_field_and_what_is_wrong(
    body: Any, message: str
) -> None:
    validate = compile_body_validator(
        {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["quiet", "calm"]},
                "inner": {"type": "object", "properties": {"deep": {"type": "string"}}},
            },
        }
    )
    with pytest.raises(ValidationError) as caught:
        validate(body)
    assert str(caught.value) == message


async def test_a_declared_body_route_gets_the_validated_body(make_deps: DepsFactory) -> None:
    app = create_app(make_deps(clock=ManualClock(BASE)))
    seen: list[Any] = []
    op = Operation(
        id="echo",
        method="POST",
        rule="/echo",
        summary="echo",
        tag="test",
        role=Role.READER,
        body={"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}},
        responses={200: Reply(description="ok")},
    )

    @table_of(app).route(op)
    async def echo(body: Any) -> Response:
        seen.append(body)
        return Response("", 200)

    async with app.test_app() as test_app:
        client = test_app.test_client()
        assert (await client.post("/echo", json={"n": 1})).status_code == 200
        bad = await client.post("/echo", json={"n": "one"})
        assert bad.status_code == 400
        assert await bad.get_json() == {"error": "n: must be an integer"}
        text = await client.post("/echo", data="n=1", headers={"Content-Type": "text/plain"})
        assert text.status_code == 415
    assert seen == [{"n": 1}]


async def test_an_operation_declared_twice_is_refused(make_deps: DepsFactory) -> None:
    app = create_app(make_deps(clock=ManualClock(BASE)))

    async def again(job_id: str) -> Response:
        return Response("", 200)

    with pytest.raises(ValueError, match="declared twice"):
        table_of(app).route(api_schemas.GET)(again)


async def test_declarations_of_routes_absent_from_the_app_stay_out_of_the_document(
    api: Api,
) -> None:
    doc = (await api.get("/openapi.json")).json
    app = create_app(api.deps)
    present = {rule.rule.replace("<", "{").replace(">", "}") for rule in table_of(app).api_rules()}
    assert set(doc["paths"]) == present
