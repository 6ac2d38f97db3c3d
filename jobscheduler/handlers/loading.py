"""Loading the user's app: ``--app MODULE[:ATTRIBUTE]`` / ``JOBSCHEDULER_APP``.

The attribute (default ``registry``) must be a :class:`HandlerRegistry`. The user's
handlers are added to the built-in ones; a name clashing with a built-in is an error. The
current directory is importable, as with ``python -m``. Every failure is an
:class:`~jobscheduler.errors.AppLoadError` whose one-line message names the module and the
cause, so the CLI can print it and exit 2 without a traceback.
"""

from __future__ import annotations

import importlib
import os
import pickle
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobscheduler.config import app_spec
from jobscheduler.errors import AppLoadError

from .builtin import default_registry
from .registry import Handler, HandlerRegistry

if TYPE_CHECKING:
    from jobscheduler.config import Settings

DEFAULT_ATTRIBUTE = "registry"


def _cause(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load_user_registry(spec: str) -> HandlerRegistry:
    """Import ``MODULE[:ATTRIBUTE]`` and return that registry (only the user's handlers)."""
    try:
        spec = app_spec(spec)
    except ValueError as exc:
        raise AppLoadError(f"app {spec!r}: {exc}") from None
    module_name, _, attribute = spec.partition(":")
    attribute = attribute or DEFAULT_ATTRIBUTE
    cwd = os.getcwd()
    if cwd not in sys.path:
        # Absolute, so worker processes (which inherit sys.path) find the module too.
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name or (exc.name and module_name.startswith(exc.name + ".")):
            raise AppLoadError(
                f"app {spec!r}: no module named {exc.name!r} (looked in {cwd} and sys.path)"
            ) from None
        raise AppLoadError(
            f"app {spec!r}: importing {module_name!r} failed: {_cause(exc)}"
        ) from None
    except BaseException as exc:  # a user's module can raise anything while importing
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise AppLoadError(
            f"app {spec!r}: importing {module_name!r} failed: {_cause(exc)}"
        ) from None
    target: object = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            default = "" if ":" in spec else " (the default)"
            raise AppLoadError(
                f"app {spec!r}: module {module_name!r} has no attribute {attribute!r}{default}"
                + registry_hint(module, module_name)
            ) from None
    if not isinstance(target, HandlerRegistry):
        raise AppLoadError(
            f"app {spec!r}: {module_name}:{attribute} is a {type(target).__name__}, "
            "not a jobscheduler.handlers.HandlerRegistry"
        )
    return target


def registry_hint(module: object, module_name: str) -> str:
    """What to write instead, as the end of an error: the module's HandlerRegistry by name
    (``MODULE:ATTR``), or how to give one."""
    found = sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, HandlerRegistry) and not name.startswith("_")
    )
    if len(found) == 1:
        return f"; its HandlerRegistry is {found[0]!r}: use {module_name}:{found[0]}"
    if found:
        choices = " or ".join(f"{module_name}:{name}" for name in found)
        return f"; it has several HandlerRegistry objects: use {choices}"
    return (
        f"; it has no HandlerRegistry: define registry = HandlerRegistry() in it, or name "
        f"yours as MODULE:ATTR ({module_name}:<name>)"
    )


def load_app(spec: str | None, settings: Settings | None = None) -> HandlerRegistry:
    """The built-in handlers (configured by ``settings``) plus, when ``spec`` is given, the
    app's."""
    registry = default_registry(settings)
    if spec:
        user = load_user_registry(spec)
        try:
            registry.include(user, origin=f"app {spec!r}")
        except ValueError as exc:
            raise AppLoadError(str(exc)) from None
    return registry


def resolve_job_types(spec: str, registry: HandlerRegistry) -> list[str]:
    """``JOB_TYPE`` for an executor: one type, a comma list, or ``*`` (every type). An
    unknown type is an AppLoadError listing the known ones."""
    names = registry.names()
    items = [item.strip() for item in spec.split(",") if item.strip()]
    if not items:
        raise AppLoadError("JOB_TYPE: names no job type")
    if items == ["*"]:
        return names
    unknown = [item for item in items if item not in registry]
    if unknown:
        raise AppLoadError(
            f"JOB_TYPE: unknown job type(s) {', '.join(repr(u) for u in unknown)} "
            f"(known: {', '.join(names)})"
        )
    return list(dict.fromkeys(items))


def describe(registry: HandlerRegistry, names: Sequence[str] | None = None) -> list[str]:
    """One line per job type with its options, as ``jobscheduler check`` prints them."""
    names = list(names or registry.names())
    width = max((len(name) for name in names), default=0)
    lines = []
    for name in names:
        handler = registry.get(name)
        options = " ".join(
            f"{key}={value}" for key, value in handler.options().items() if value is not None
        )
        lines.append(f"{name.ljust(width)}  {options}".rstrip())
    return lines


def process_problem(handler: Handler) -> str | None:
    """Why a worker process could not get this handler by name (None: it can, or the
    handler does not run in a process)."""
    if handler.run_in != "process":
        return None
    try:
        pickle.loads(pickle.dumps(handler.func))
    except Exception as exc:
        return (
            f"a worker process cannot import the function ({_cause(exc)}); "
            "define it at module level, undecorated by anything but registry.handler"
        )
    return None
