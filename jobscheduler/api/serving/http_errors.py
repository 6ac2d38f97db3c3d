"""JSON bodies for the errors hypercorn answers itself, before any ASGI app sees a request.

A request line or header block longer than hypercorn's ``h11_max_incomplete_size`` (16 KiB)
gets ``431``, and bytes that are not HTTP get ``400``: hypercorn's HTTP/1.1 protocol
(``H11Protocol._send_error_response``) sends those with an empty body, which breaks the
contract that every error is ``{"error": "..."}`` with a JSON content type. No setting
changes that body and no ASGI hook runs for such requests, so :func:`install` replaces that
one method with an equivalent that adds the JSON body. hypercorn is pinned to one minor
version in ``pyproject.toml``; ``tests/unit/test_http_errors.py`` fails if an upgrade moves
the method.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from itertools import chain
from typing import Any

import h11
from hypercorn.protocol.h11 import H11Protocol

from ._patch import patch_once

_MESSAGES = {
    400: "malformed HTTP request",
    431: "request line or headers too large (limit 16 KiB)",
}

_INSTALLED = "_jobscheduler_json_errors"


def error_body(status_code: int) -> bytes:
    """The contract's error JSON for a protocol-level error status."""
    try:
        default = HTTPStatus(status_code).phrase.lower()
    except ValueError:
        default = "bad request"
    message = _MESSAGES.get(status_code, default)
    return json.dumps({"error": message}, separators=(",", ":")).encode()


async def _send_error_response(self: Any, status_code: int) -> None:
    body = error_body(status_code)
    await self._send_h11_event(
        h11.Response(
            status_code=status_code,
            headers=list(
                chain(
                    [
                        (b"content-type", b"application/json"),
                        (b"content-length", b"%d" % len(body)),
                        (b"connection", b"close"),
                    ],
                    self.config.response_headers("h11"),
                )
            ),
        )
    )
    await self._send_h11_event(h11.Data(data=body))
    await self._send_h11_event(h11.EndOfMessage())


def install() -> None:
    """Make hypercorn's own HTTP/1.1 error responses carry the JSON error body. Idempotent.

    Raises RuntimeError if this hypercorn no longer has the method being replaced.
    """
    patch_once(
        H11Protocol,
        "_send_error_response",
        lambda _original: _send_error_response,
        marker=_INSTALLED,
        verb="replace",
    )
