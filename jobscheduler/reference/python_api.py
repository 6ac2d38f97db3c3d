"""The Python API's reference page: mkdocstrings renders each object from its docstrings at
build time; this page only says which objects, in which order."""

from __future__ import annotations

from ._markdown import page_top

#: (heading, what it is for, the objects mkdocstrings documents).
SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "The client",
        "Call the HTTP API from Python, blocking or async (trio and asyncio).",
        (
            "jobscheduler.client.Client",
            "jobscheduler.client.AsyncClient",
            "jobscheduler.client.job_body",
            "jobscheduler.client.Job",
        ),
    ),
    (
        "Your handlers",
        "Register the functions that run your job types (`--app MODULE:ATTR`).",
        (
            "jobscheduler.handlers.HandlerRegistry",
            "jobscheduler.handlers.HandlerOptions",
            "jobscheduler.handlers.JobContext",
            "jobscheduler.handlers.ChildOptions",
            "jobscheduler.handlers.PermanentError",
        ),
    ),
    ("Errors", "Every error the package raises on purpose.", ("jobscheduler.errors",)),
)


def render() -> str:
    """The page."""
    lines = [
        *page_top("Python API", "`jobscheduler.reference.python_api.SECTIONS`"),
    ]
    for heading, purpose, objects in SECTIONS:
        lines += [f"## {heading}", "", purpose, ""]
        for name in objects:
            lines += [f"::: {name}", ""]
    return "\n".join(lines)
