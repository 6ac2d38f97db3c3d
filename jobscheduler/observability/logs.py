"""Structured logging: one line per event, text (logfmt) or JSON, on stderr."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class _Formatter(logging.Formatter):
    """One line per event: the message plus every ``extra={...}`` field, text or JSON."""

    def __init__(self, fmt: str, role: str) -> None:
        super().__init__()
        self._json = fmt == "json"
        self._role = role

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "role": getattr(record, "role", self._role),
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key != "role" and value is not None:
                fields[key] = value
        if record.exc_info:
            fields["exc"] = self.formatException(record.exc_info)
        if self._json:
            return json.dumps(fields, default=str)
        head = f"{fields.pop('ts')} {fields.pop('level'):<7} {fields.pop('msg')}"
        rest = " ".join(f"{k}={_logfmt(v)}" for k, v in fields.items())
        return f"{head} {rest}"


class FieldsAdapter(logging.LoggerAdapter[logging.Logger]):
    """A logger with structured fields (``job_id``, ``tenant``, ...) added to every line,
    next to the ``extra={...}`` of each call -- the standard adapter replaces a call's
    ``extra`` with its own, so a line's own fields (an error, a retry time) were lost."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


def _logfmt(value: Any) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        return json.dumps(text)
    return text


def configure_logging(level: str, fmt: str, role: str) -> None:
    """Route every log record to stderr as one structured line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(fmt, role))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("hypercorn.error", "hypercorn.access", "quart.serving"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
