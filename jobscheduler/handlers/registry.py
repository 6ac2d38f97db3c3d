"""Handlers are plain functions registered by job type name.

A handler receives a :class:`JobContext` and either returns (success) or raises (failure:
the job is retried with backoff or dead-lettered). ``async def`` handlers run on the trio
loop and must not block; plain ``def`` handlers run in a worker thread. An optional payload
validator runs at ``POST /jobs`` so bad payloads are rejected with 400 instead of failing
later in the executor.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

import attrs
import trio

from ..errors import UnknownHandler
from ..model import PayloadValidator


@attrs.frozen(kw_only=True)
class JobContext:
    """What a handler knows about the job it runs."""

    job_id: str
    tenant_id: str
    job_type: str
    payload: Mapping[str, Any]
    attempt: int
    max_attempts: int
    logger: logging.LoggerAdapter[logging.Logger]
    #: The job's idempotency key (a cron run's is ``<template key>-run-<unixnano>``).
    idempotency_key: str = ""
    #: When the job was due (for a retry: when the retry was due).
    scheduled_at: datetime | None = None
    #: For a cron run: the id of the template that spawned it.
    template_id: str | None = None


#: A handler; its return value (JSON, at most 64 KiB encoded) becomes the job's ``result``.
HandlerFunc = Callable[[JobContext], Awaitable[Any] | Any]


@attrs.frozen(kw_only=True)
class Handler:
    name: str
    func: HandlerFunc
    validate: PayloadValidator | None = None
    is_async: bool = attrs.field(init=False)

    @is_async.default
    def _is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)

    async def run(self, ctx: JobContext) -> Any:
        """Call the handler: awaited if async, in a worker thread if plain; returns what it
        returned."""
        if self.is_async:
            return await self.func(ctx)
        return await trio.to_thread.run_sync(self.func, ctx)


class HandlerRegistry:
    """Job type name -> handler. The set of names is the set of valid ``jobType`` values."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def register(
        self,
        name: str,
        func: HandlerFunc,
        *,
        validate: PayloadValidator | None = None,
    ) -> None:
        """Register ``func`` for job type ``name``; raise ValueError on a duplicate name."""
        if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ValueError(
                f"invalid job type name {name!r}: use letters, digits, '-', '_' and '.'"
            )
        if name in self._handlers:
            raise ValueError(f"job type {name!r} is already registered")
        self._handlers[name] = Handler(name=name, func=func, validate=validate)

    def handler(
        self, name: str, *, validate: PayloadValidator | None = None
    ) -> Callable[[HandlerFunc], HandlerFunc]:
        """Decorator form of :meth:`register`."""

        def decorate(func: HandlerFunc) -> HandlerFunc:
            self.register(name, func, validate=validate)
            return func

        return decorate

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

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
