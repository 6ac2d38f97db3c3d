"""argparse types shared by the command line and the tools (a leaf module: the standard
library only). Each raises ArgumentTypeError, which argparse reports beside the flag."""

from __future__ import annotations

import argparse
import json
from typing import Any


def json_value(text: str) -> Any:
    """Any JSON value."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None


def json_object(text: str) -> dict[str, Any]:
    """A JSON object (``'{"url": "..."}'``)."""
    value = json_value(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def integer(text: str) -> int:
    """A whole number, of any sign (the callers bound it)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def positive_int(text: str) -> int:
    """A whole number, 1 or more."""
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
