"""One handler: :class:`Handler`, its function and its per-type options as
:func:`make_handler` checks them (see :mod:`.registry` for what the options mean)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypedDict

import attrs
import trio

from jobscheduler.domain.durations import parse_duration
from jobscheduler.domain.flow import Limits
from jobscheduler.domain.model import MAX_ATTEMPTS_LIMIT, Status
from jobscheduler.domain.retention import format_keep, parse_keep
from jobscheduler.domain.validation import PayloadValidator
from jobscheduler.errors import ValidationError

from .context import JobContext
from .schema import schema_validator
from .tasks import TaskHandle

RunIn = Literal["trio", "process", "thread"]
RUN_IN: tuple[RunIn, ...] = ("trio", "process", "thread")

#: The logger handlers get through ``ctx.logger`` (in every runner, worker processes too).
HANDLER_LOGGER = "jobscheduler.handler"

_NAME = re.compile(r"[A-Za-z0-9._-]+")


HandlerFunc = Callable[[JobContext], Awaitable[Any] | Any]


class HandlerOptions(TypedDict, total=False):
    """The per-type options of a handler, as :meth:`~.registry.HandlerRegistry.register`
    and its decorator form ``handler`` take them and :func:`make_handler` checks them."""

    validate: PayloadValidator | Mapping[str, Any] | None
    timeout: float | str | None
    max_attempts: int | None
    run_in: RunIn | None
    concurrency: int | None
    max_running: int | None
    rate_limit: str | None
    key_rate_limit: str | None
    burst: int | None
    retention: Mapping[str, str | float] | None


def _timeout(value: float | str | None) -> float | None:
    if value is None:
        return None
    seconds = parse_duration(value) if isinstance(value, str) else float(value)
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"timeout must be a positive duration, got {value!r}")
    return seconds


def format_seconds(seconds: float) -> str:
    """``30`` -> ``30s``, ``0.5`` -> ``500ms``, ``90`` -> ``90s``: how errors name a timeout."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    return f"{seconds:g}s"


@attrs.frozen(kw_only=True)
class Handler:
    """A registered handler and its per-type options."""

    name: str
    func: HandlerFunc
    validate: PayloadValidator | None = None
    #: The JSON Schema the payload validator checks, when it was given as a schema.
    schema: Mapping[str, Any] | None = None
    #: Seconds an attempt may run before it is stopped and fails; None: no limit.
    timeout: float | None = None
    #: Default ``maxAttempts`` of jobs of this type that do not say; None: the global one.
    max_attempts: int | None = None
    run_in: RunIn = "trio"
    #: Flow control of the type's jobs in each tenant (an admin may override them per tenant).
    limits: Limits = attrs.field(factory=Limits)
    #: How long finished jobs of this type are kept, per status (seconds); statuses not
    #: named keep the defaults (``RETENTION_*``). A tenant's override wins over it.
    retention: Mapping[Status, float] = attrs.field(factory=dict)

    @property
    def is_async(self) -> bool:
        return self.run_in == "trio"

    async def run(self, ctx: JobContext) -> Any:
        """Call the handler once, right here: awaited if async, else in a worker thread.
        No timeout and no worker process -- for tests and direct calls; the executor runs
        handlers through :mod:`jobscheduler.handlers.runners`."""
        if self.is_async:
            return await self.func(ctx)
        return await trio.to_thread.run_sync(self.func, ctx)

    def options(self) -> dict[str, Any]:
        """The options as ``check`` prints them."""
        return {
            "run_in": self.run_in,
            "timeout": format_seconds(self.timeout) if self.timeout is not None else None,
            "max_attempts": self.max_attempts,
            "validate": "json-schema"
            if self.schema is not None
            else ("function" if self.validate is not None else None),
            **self.limits.to_json(),
            "retention": ",".join(f"{k}:{v}" for k, v in format_keep(self.retention).items())
            or None,
        }


def make_handler(
    name: str,
    func: HandlerFunc,
    *,
    validate: PayloadValidator | Mapping[str, Any] | None = None,
    timeout: float | str | None = None,
    max_attempts: int | None = None,
    run_in: RunIn | None = None,
    concurrency: int | None = None,
    max_running: int | None = None,
    rate_limit: str | None = None,
    key_rate_limit: str | None = None,
    burst: int | None = None,
    retention: Mapping[str, str | float] | None = None,
) -> Handler:
    """Check the options and build the Handler; ValueError names what is wrong."""
    try:
        limits = flow_limits(
            concurrency=concurrency,
            max_running=max_running,
            rate_limit=rate_limit,
            key_rate_limit=key_rate_limit,
            burst=burst,
        )
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if not name or _NAME.fullmatch(name) is None or len(name) > 200:
        raise ValueError(f"invalid job type name {name!r}: use letters, digits, '-', '_' and '.'")
    if not callable(func):
        raise ValueError(f"{name}: handler must be a function, got {type(func).__name__}")
    # A task handle calls the function it wraps: where it runs is the function's business.
    is_async = inspect.iscoroutinefunction(
        func.__wrapped__ if isinstance(func, TaskHandle) else func
    )
    if run_in is None:
        run_in = "trio" if is_async else "process"
    if run_in not in RUN_IN:
        raise ValueError(f"{name}: run_in must be one of {', '.join(RUN_IN)}, got {run_in!r}")
    if is_async and run_in != "trio":
        raise ValueError(f"{name}: an async def handler runs on trio; run_in={run_in!r} is for def")
    if not is_async and run_in == "trio":
        raise ValueError(f"{name}: a plain def handler runs in a 'process' or a 'thread'")
    if run_in == "process" and (
        "<locals>" in getattr(func, "__qualname__", "<locals>") or not hasattr(func, "__module__")
    ):
        raise ValueError(
            f"{name}: a def handler runs in a worker process, which imports it by name: "
            "define it at module level (or pass run_in='thread')"
        )
    if max_attempts is not None and (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, int)
        or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
    ):
        raise ValueError(f"{name}: max_attempts must be an integer 1..{MAX_ATTEMPTS_LIMIT}")
    schema: Mapping[str, Any] | None = None
    validator: PayloadValidator | None
    if isinstance(validate, Mapping):
        schema = validate
        validator = schema_validator(validate)
    elif validate is None or callable(validate):
        validator = validate
    else:
        raise ValueError(f"{name}: validate must be a function or a JSON Schema dict")
    try:
        seconds = _timeout(timeout)
        keep = parse_keep(retention or {})
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    return Handler(
        name=name,
        func=func,
        validate=validator,
        schema=schema,
        timeout=seconds,
        max_attempts=max_attempts,
        run_in=run_in,
        limits=limits,
        retention=keep,
    )


def flow_limits(**options: Any) -> Limits:
    """The flow-control options of ``register``/``handler`` as Limits; ValueError names a
    bad one."""
    try:
        return Limits.of(**options)
    except ValidationError as exc:
        raise ValueError(str(exc)) from None
