"""Request bodies of declared operations: read strictly, validated against the schema the
OpenAPI document publishes (a ``fastjsonschema`` validator compiled once per operation), and
violations worded like :mod:`jobscheduler.domain.validation`'s own messages: the field, then
what is wrong with it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema
from quart import request

from jobscheduler.domain.model import parse_time
from jobscheduler.domain.validation import loads_json_body
from jobscheduler.errors import UnsupportedMediaType, ValidationError

Schema = dict[str, Any]


def compile_body_validator(schema: Schema) -> Callable[[Any], None]:
    """A validator raising :class:`ValidationError` worded like validation.py's own checks."""
    check = fastjsonschema.compile(schema)

    def validate(body: Any) -> None:
        try:
            check(body)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise ValidationError(describe_violation(exc)) from None

    return validate


async def any_json_body() -> Any:
    """This request's body parsed as JSON, whatever its Content-Type (ValidationError when
    it is not JSON); :func:`read_json_body` is the strict reading."""
    raw = await request.get_data(cache=False)
    return loads_json_body(raw.encode() if isinstance(raw, str) else raw)


def json_object(body: Any, fields: frozenset[str]) -> dict[str, Any]:
    """``body``, if it is a JSON object of only ``fields``; else ValidationError."""
    if not isinstance(body, dict):
        raise ValidationError("request body must be a JSON object")
    unknown = sorted(set(body) - fields)
    if unknown:
        raise ValidationError(f"unknown field(s): {', '.join(unknown)}")
    return body


def describe_violation(exc: fastjsonschema.JsonSchemaValueException) -> str:
    """One client-safe sentence for a schema violation (the field, then what is wrong)."""
    path = [str(part) for part in (exc.path or [])[1:]]
    field = ".".join(path)
    rule, value = exc.rule, exc.value
    definition: Mapping[str, Any] = exc.definition or {}
    if rule == "required" and isinstance(value, dict):
        missing = [name for name in exc.rule_definition if name not in value]
        name = ".".join([*path, missing[0]]) if missing else field
        return f"{name} is required"
    if rule == "additionalProperties" and isinstance(value, dict):
        unknown = sorted(set(value) - set(definition.get("properties", {})))
        where = f"{field}: " if field else ""
        return f"{where}unknown field(s): {', '.join(unknown)}"
    if rule == "type":
        expected = exc.rule_definition
        names = [expected] if isinstance(expected, str) else list(expected)
        names = [n for n in names if n != "null"]
        words = {
            "object": "a JSON object",
            "string": "a string",
            "integer": "an integer",
            "number": "a number",
            "array": "an array",
            "boolean": "true or false",
        }
        what = " or ".join(words.get(n, n) for n in names)
        if not field:
            return f"request body must be {what}"
        return f"{field}: must be {what}"
    subject = field or "request body"
    if rule == "minLength":
        return f"{subject}: must not be empty"
    if rule == "maxLength":
        return f"{subject}: longer than {exc.rule_definition} characters"
    if rule == "minimum":
        return f"{subject}: must be at least {exc.rule_definition}"
    if rule == "maximum":
        return f"{subject}: must be at most {exc.rule_definition}"
    if rule == "enum":
        noun = definition.get("x-noun", "value")
        known = ", ".join(str(v) for v in exc.rule_definition if v is not None)
        return f"{subject}: unknown {noun} {value!r} (known: {known})"
    if rule in ("minItems", "maxItems"):
        return f"{subject}: {rule} is {exc.rule_definition}"
    if rule == "format" and exc.rule_definition == "date-time" and isinstance(value, str):
        # The API's own words for a time (a missing zone says so and how to add one).
        try:
            parse_time(value, subject)
        except ValidationError as error:
            return str(error)
    message = str(exc.message)
    return f"{subject}: {message.removeprefix(exc.name or '').strip()}"


async def read_json_body(validate: Callable[[Any], None], *, required: bool = True) -> Any:
    """The request's JSON body, validated; 415 for another content type, 400 if malformed.
    An empty body reads as None when not ``required``.

    Raises :class:`UnsupportedMediaType` (answered 415 by the app's error table)."""
    raw = await request.get_data(cache=False)
    data = raw.encode() if isinstance(raw, str) else raw
    if not required and not data.strip():
        body = None
    else:
        mimetype = request.mimetype
        if mimetype and mimetype != "application/json" and not mimetype.endswith("+json"):
            raise UnsupportedMediaType("Content-Type must be application/json")
        body = loads_json_body(data)
    validate(body)
    return body
