"""Payload validators from JSON Schema documents (checked with the ``jsonschema`` library)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from jobscheduler.domain.validation import PayloadValidator
from jobscheduler.errors import ValidationError


def _where(path: Any) -> str:
    """``deque(['to', 0])`` -> ``payload.to[0]``."""
    text = "payload"
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def schema_validator(schema: Mapping[str, Any]) -> PayloadValidator:
    """A payload validator checking ``schema``; the schema itself is checked here (its
    ``$schema`` picks the draft, 2020-12 by default), so a broken one fails at
    registration. A payload that does not match raises ValidationError with the path and
    message of the most relevant schema error."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(dict(schema))
    except jsonschema.exceptions.SchemaError as exc:
        raise ValueError(f"invalid JSON Schema: {exc.message}") from None
    validator = cls(dict(schema))

    def validate(payload: Mapping[str, Any]) -> None:
        error = jsonschema.exceptions.best_match(validator.iter_errors(payload))
        if error is not None:
            raise ValidationError(f"{_where(error.absolute_path)}: {error.message}")

    return validate
