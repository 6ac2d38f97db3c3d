"""Which reference pages are generated, and writing or checking them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from . import cli, configuration, http_api, python_api

#: Page (relative to the docs folder) -> the function that renders it.
GENERATED: Mapping[str, Callable[[], str]] = {
    "reference/http-api.md": http_api.render,
    "reference/configuration.md": configuration.render,
    "reference/cli.md": cli.render,
    "reference/python.md": python_api.render,
}


def generate(docs: Path) -> list[str]:
    """Write every generated page under ``docs``; the pages that changed."""
    changed = []
    for name, render in GENERATED.items():
        path = docs / name
        text = render()
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            changed.append(name)
    return changed


def stale_pages(docs: Path) -> list[str]:
    """The generated pages under ``docs`` that differ from what the code makes now."""
    return [
        name
        for name, render in GENERATED.items()
        if not (docs / name).exists() or (docs / name).read_text() != render()
    ]
