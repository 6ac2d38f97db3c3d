"""Handlers are plain functions registered by job type name, with per-type options.

A handler receives a :class:`JobContext` and either returns (success) or raises (failure:
the job is retried with backoff or dead-lettered; :class:`~jobscheduler.errors.PermanentError`
dead-letters at once). Where it runs is its ``run_in``:

- ``async def`` handlers run on the trio loop (``"trio"``) and are cancelled at their
  deadline, on shutdown and when their claim is lost;
- plain ``def`` handlers run by default in a worker process (``"process"``) that is killed
  at the same moments, so they must be importable module-level functions;
- ``run_in="thread"`` runs a ``def`` handler in a worker thread: it cannot be stopped, so a
  timed-out or cancelled thread is abandoned (left to finish on its own) and its job fails
  or is handed back anyway.

An optional payload validator (a function, or a JSON Schema dict) runs at ``POST /jobs`` so
bad payloads are rejected with 400 instead of failing later in the executor. An optional
``retention={"completed": "1h", "dlq": "90d"}`` sets how long finished jobs of the type are
kept (the executors publish it to the store; the reaper prunes by it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Unpack, overload

from jobscheduler.domain.flow import Limits
from jobscheduler.domain.validation import PayloadValidator
from jobscheduler.errors import UnknownHandler

from .connection import Connection, shared
from .context import JobContext as JobContext
from .definition import HANDLER_LOGGER as HANDLER_LOGGER
from .definition import RUN_IN as RUN_IN
from .definition import Handler as Handler
from .definition import HandlerFunc as HandlerFunc
from .definition import HandlerOptions as HandlerOptions
from .definition import RunIn as RunIn
from .definition import flow_limits as flow_limits
from .definition import format_seconds as format_seconds
from .definition import make_handler as make_handler
from .schedules import Schedule, make_schedule
from .tasks import TaskHandle

if TYPE_CHECKING:
    pass


class HandlerRegistry:
    """Job type name -> handler. The set of names is the set of valid ``jobType`` values.

    Also the app's schedules (:meth:`schedule`) and the connection its task handles enqueue
    through (:meth:`connect`; by default the process's shared one, configured from the
    environment).
    """

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._schedules: dict[tuple[str | None, str], Schedule] = {}
        self._connection: Connection | None = None

    def register(
        self, name: str, func: HandlerFunc, **options: Unpack[HandlerOptions]
    ) -> TaskHandle:
        """Register ``func`` for job type ``name``; ValueError on a duplicate name or a bad
        option (:class:`~jobscheduler.handlers.definition.HandlerOptions`; see the module
        docstring for what they mean). Returns a
        :class:`~jobscheduler.handlers.tasks.TaskHandle` to enqueue jobs of the type.

        Flow control, in each tenant: ``concurrency`` jobs at most at once per
        ``concurrencyKey``, ``max_running`` at most at once in all, ``rate_limit`` /
        ``key_rate_limit`` starts per period (``"100/s"``, ``"10/m"``) of the type / of
        one key, ``burst`` starts at once after a pause."""
        if name in self._handlers:
            raise ValueError(f"job type {name!r} is already registered")
        self._handlers[name] = make_handler(name, func, **options)
        return func if isinstance(func, TaskHandle) else TaskHandle(self, name, func)

    def handler(
        self, name: str, **options: Unpack[HandlerOptions]
    ) -> Callable[[HandlerFunc], TaskHandle]:
        """Decorator form of :meth:`register`. It returns a
        :class:`~jobscheduler.handlers.tasks.TaskHandle`: the function, still callable (and
        found by a worker process under its own name), that can also ``enqueue`` jobs."""

        def decorate(func: HandlerFunc) -> TaskHandle:
            # The handle is what the module holds under the function's name, so it is what
            # the registry runs: a worker process unpickles it by that name.
            handle = TaskHandle(self, name, func)
            return self.register(name, handle, **options)

        return decorate

    # -- where handles send -----------------------------------------------------------------

    @property
    def connection(self) -> Connection:
        """Where this registry's task handles send jobs (see :meth:`connect`)."""
        return self._connection if self._connection is not None else shared

    def connect(self, url: str | None = None, **options: Any) -> Connection:
        """Give this registry's handles a connection of their own (the arguments of
        :class:`~jobscheduler.handlers.connection.Connection`: ``url``, ``api_key``,
        ``tenant_id``, ``retry_for``, ...) instead of the process's shared one."""
        self._connection = Connection(url, **options)
        return self._connection

    # -- schedules ----------------------------------------------------------------------------

    @overload
    def schedule(
        self, name: str, *, cron: str, job_type: str | TaskHandle, **options: Any
    ) -> Schedule: ...

    @overload
    def schedule(
        self, name: str, *, cron: str, job_type: None = None, **options: Any
    ) -> Callable[[TaskHandle], TaskHandle]: ...

    def schedule(
        self, name: str, *, cron: str, job_type: str | TaskHandle | None = None, **options: Any
    ) -> Schedule | Callable[[TaskHandle], TaskHandle]:
        """Declare a cron template in code: ``name`` is its idempotency key, its identity
        within ``tenant_id``; ``jobscheduler schedules sync`` makes the store match.

        Options: ``tenant_id``, ``payload``, ``priority``, ``max_attempts`` and the schedule
        settings ``timezone``, ``dst_gap``, ``dst_fold``, ``catch_up``,
        ``catch_up_window``, ``jitter``, ``overlap`` (as in ``POST /jobs``). Without
        ``job_type`` it is a decorator of a handle (``@registry.schedule(...)`` above
        ``@registry.handler(...)``). ValidationError (naming the schedule and the field)
        for what the API would refuse; ValueError for a name declared twice in a tenant.
        """
        if job_type is None:

            def decorate(handle: TaskHandle) -> TaskHandle:
                if not isinstance(handle, TaskHandle):
                    raise TypeError(
                        f"schedule {name!r}: decorate a handler, i.e. put @registry.schedule "
                        "above @registry.handler(...), or pass job_type="
                    )
                self.schedule(name, cron=cron, job_type=handle.name, **options)
                return handle

            return decorate
        job_type_name = job_type.name if isinstance(job_type, TaskHandle) else job_type
        handler = self._handlers.get(job_type_name)
        schedule = make_schedule(
            name,
            cron=cron,
            job_type=job_type_name,
            validator=handler.validate if handler is not None else None,
            **options,
        )
        key = (schedule.tenant_id, schedule.name)
        if key in self._schedules:
            raise ValueError(
                f"schedule {name!r} is already declared for tenant {schedule.tenant_id!r}"
            )
        self._schedules[key] = schedule
        return schedule

    def schedules(self) -> list[Schedule]:
        """The declared schedules, in declaration order."""
        return list(self._schedules.values())

    def include(self, other: HandlerRegistry, *, origin: str) -> None:
        """Add every handler of ``other``; a name already here is a ValueError naming
        ``origin`` (unless it is the very same handler function, e.g. a built-in the other
        registry also started from)."""
        for name, handler in other._handlers.items():
            mine = self._handlers.get(name)
            if mine is not None:
                # Bound methods (the http handler's ``run``) are new objects on each access:
                # compare what they wrap.
                if getattr(mine.func, "__func__", mine.func) is getattr(
                    handler.func, "__func__", handler.func
                ):
                    continue
                raise ValueError(
                    f"job type {name!r} of {origin} clashes with a built-in handler: rename it"
                )
            self._handlers[name] = handler
        for key, schedule in other._schedules.items():
            self._schedules.setdefault(key, schedule)

    def get(self, name: str) -> Handler:
        try:
            return self._handlers[name]
        except KeyError:
            raise UnknownHandler(f"no handler registered for job type {name!r}") from None

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def validators(self) -> dict[str, PayloadValidator | None]:
        """Job type -> payload validator, as the API's request validation needs it."""
        return {name: handler.validate for name, handler in self._handlers.items()}

    def max_attempts_defaults(self) -> dict[str, int]:
        """Job type -> its default ``maxAttempts``, for the types that set one."""
        return {
            name: handler.max_attempts
            for name, handler in self._handlers.items()
            if handler.max_attempts is not None
        }

    def limits(self) -> dict[str, Limits]:
        """Job type -> its flow-control limits, for the types that declare some."""
        return {
            name: handler.limits
            for name, handler in self._handlers.items()
            if not handler.limits.empty
        }

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
