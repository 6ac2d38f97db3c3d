"""Replacing one method of a hypercorn class, once: the mechanism the serving modules'
``install`` functions share (hypercorn is pinned to one minor version; each module's unit
test fails if an upgrade moves what it replaces)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def patch_once(
    cls: type, name: str, make: Callable[[Any], Any], *, marker: str, verb: str = "wrap"
) -> None:
    """Set ``cls.name`` to ``make(original)`` unless ``marker`` says it was done already.

    Raises RuntimeError, saying what it would ``verb``, if ``cls`` has no such method."""
    if getattr(cls, marker, False):
        return
    original = getattr(cls, name, None)
    if not callable(original):
        raise RuntimeError(f"hypercorn's {cls.__name__} has no {name} to {verb}")
    setattr(cls, name, make(original))
    setattr(cls, marker, True)
