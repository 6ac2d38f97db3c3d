"""The JSON answers of the API: the raw resource, or ``{"error": "..."}`` with its status."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from quart import Response, request


def json_response(body: Any, status: int, headers: Mapping[str, str] | None = None) -> Response:
    """``body`` as compact JSON (UTF-8, not ASCII-escaped) with ``status``."""
    return Response(
        json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        status=status,
        content_type="application/json",
        headers=dict(headers or {}),
    )


def link_next_page(response: Response, cursor: str) -> None:
    """Set ``response``'s ``Link: rel="next"`` header: this request again, with ``cursor``
    in place of its own."""
    pairs = [(k, v) for k, v in request.args.items(multi=True) if k != "cursor"]
    pairs.append(("cursor", cursor))
    response.headers["Link"] = f'<{request.path}?{urlencode(pairs)}>; rel="next"'


def error_response(message: str, status: int) -> Response:
    """The contract's error body, ``{"error": message}``."""
    return json_response({"error": message}, status)
