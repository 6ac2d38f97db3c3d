"""The readers of the environment variables' text: each turns one value into its setting or
raises ValueError saying what it must be."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable
from typing import TypeVar

from jobscheduler.domain.addresses import Allowlist
from jobscheduler.domain.durations import parse_duration
from jobscheduler.domain.retention import MAX_KEEP

T = TypeVar("T")
N = TypeVar("N", int, float)

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")


def _bounded(
    parse: Callable[[str], N], holds: Callable[[N], bool], must: str
) -> Callable[[str], N]:
    """A reader: ``parse``, then ValueError ``"<must>, got <text>"`` unless ``holds``."""

    def read(text: str) -> N:
        value = parse(text)
        if not holds(value):
            raise ValueError(f"{must}, got {text!r}")
        return value

    return read


_positive_duration = _bounded(parse_duration, lambda s: s > 0, "must be greater than zero")
_retention = _bounded(_positive_duration, lambda s: s <= MAX_KEEP, "must be at most 100 years")
_non_negative_duration = _bounded(parse_duration, lambda s: s >= 0, "must not be negative")
_positive_int = _bounded(int, lambda v: v > 0, "must be a positive integer")
_non_negative_int = _bounded(int, lambda v: v >= 0, "must be 0 or a positive integer")
_non_negative_float = _bounded(
    float, lambda v: v >= 0 and v != float("inf"), "must be 0 or a positive number"
)


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ValueError(f"not a TCP port: {text!r}")
    return port


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip()
        for choice in choices:
            if value.upper() == choice.upper():
                return choice
        raise ValueError(f"must be one of {', '.join(choices)}, got {text!r}")

    parse.choices = choices  # type: ignore[attr-defined]  # the docs' "unit"
    return parse


def _non_empty(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text.strip()


_TOPIC_PREFIX = re.compile(r"[A-Za-z0-9._-]{1,100}")


def _topic_prefix(text: str) -> str:
    if _TOPIC_PREFIX.fullmatch(text) is None:
        raise ValueError(
            f"must be at most 100 of the characters Kafka allows in names (A-Z a-z 0-9 . _ -), "
            f"got {text!r}"
        )
    return text


def _csv(text: str) -> tuple[str, ...]:
    items = tuple(item.strip() for item in text.split(",") if item.strip())
    if not items:
        raise ValueError("must list at least one item")
    return items


_APP_SPEC = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*(:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*)?")


def app_spec(text: str) -> str:
    """``MODULE[:ATTRIBUTE]`` (dotted names), e.g. ``myjobs`` or ``myapp.jobs:registry``."""
    value = text.strip()
    if _APP_SPEC.fullmatch(value) is None:
        raise ValueError(f"must be MODULE or MODULE:ATTRIBUTE (e.g. myjobs:registry), got {text!r}")
    return value


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"must be true or false (or 1/0, yes/no, on/off), got {text!r}")


def _bool_or_auto(text: str) -> bool | None:
    """``auto`` (None: the component decides), else a boolean."""
    return None if text.strip().lower() == "auto" else _bool(text)


def _allowlist(text: str) -> tuple[str, ...]:
    entries = _csv(text)
    Allowlist.parse(entries)  # raises ValueError naming a bad entry
    return entries


def _url(text: str) -> str:
    value = text.strip()
    if not value.startswith(("http://", "https://")) or len(value) <= len("https://"):
        raise ValueError(f"must be an http:// or https:// URL, got {text!r}")
    return value


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"
