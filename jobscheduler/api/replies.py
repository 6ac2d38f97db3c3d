"""The JSON answers of the API: the raw resource, or ``{"error": "..."}`` with its status."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from quart import Response


def json_response(body: Any, status: int, headers: Mapping[str, str] | None = None) -> Response:
    """``body`` as compact JSON (UTF-8, not ASCII-escaped) with ``status``."""
    return Response(
        json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        status=status,
        content_type="application/json",
        headers=dict(headers or {}),
    )


def error_response(message: str, status: int) -> Response:
    """The contract's error body, ``{"error": message}``."""
    return json_response({"error": message}, status)
