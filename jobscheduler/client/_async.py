"""The async client (httpx.AsyncClient): runs under trio and asyncio alike (anyio). How it
sends a call, follows pages and sleeps between polls; its methods are the operations of
:mod:`._operations`, bound to it as coroutines (async iterators for the listings)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import httpx

from jobscheduler.errors import DuplicateJob

from . import _operations as operations
from . import _webhooks as webhooks
from . import _workflows as workflows
from ._call import Call, Paged, connection
from ._errors import unreachable
from ._operations import CreateOrGet, Poll, as_method
from ._transport import async_transport
from ._types import Job

P = ParamSpec("P")
T = TypeVar("T")


def _awaiting(
    operation: Callable[P, Call[T]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """The coroutine method that sends the operation's call and returns its answer."""

    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._send(operation(*args, **kwargs))

    return as_method(method, operation)


def _paging(
    operation: Callable[P, Call[Paged[T]]],
) -> Callable[Concatenate[AsyncClient, P], AsyncIterator[list[T]]]:
    """The method that yields the pages of the operation's listing."""

    async def method(
        self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncIterator[list[T]]:
        async for items in self._pages(operation(*args, **kwargs)):
            yield items

    return as_method(method, operation)


def _itemising(
    operation: Callable[P, Call[Paged[T]]],
) -> Callable[Concatenate[AsyncClient, P], AsyncIterator[T]]:
    """The method that yields the items of the operation's listing, a page at a time."""

    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        async for items in self._pages(operation(*args, **kwargs)):
            for item in items:
                yield item

    return as_method(method, operation)


def _polling(
    operation: Callable[P, Poll],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, Job]]:
    """The coroutine method that polls the job until it is final (the operation's
    :class:`Poll`), sleeping on the running event loop's clock (virtual under trio's
    MockClock)."""

    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> Job:
        poll = operation(*args, **kwargs)
        deadline = anyio.current_time() + poll.timeout
        while True:
            job = await self._send(poll.call)
            pause = poll.pause(job, left=deadline - anyio.current_time())  # WaitTimeout past it
            if pause is None:
                return job
            await anyio.sleep(pause)

    return as_method(method, operation)


def _creating_or_getting(
    operation: Callable[P, CreateOrGet],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, tuple[Job, bool]]]:
    """The coroutine method that creates, or gets the job holding the key."""

    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> tuple[Job, bool]:
        plan = operation(*args, **kwargs)
        try:
            return await self._send(plan.create), True
        except DuplicateJob as exc:
            if exc.existing_id is None:
                raise
            return await self._send(plan.get(exc.existing_id)), False

    return as_method(method, operation)


class AsyncClient:
    """The async twin of :class:`Client`: the same methods with the same arguments and
    errors, as coroutines (``pages``/``list`` are async iterators). Use it as an async
    context manager or call :meth:`aclose`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        url, headers = connection(base_url, api_key)
        self.base_url = url
        # Without a transport of the caller's, httpx's own, each request in one write.
        self._http = httpx.AsyncClient(
            base_url=url,
            headers=headers,
            timeout=timeout,
            transport=transport if transport is not None else async_transport(),
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[T]) -> T:
        try:
            response = await self._http.request(**call.request())
        except httpx.TransportError as exc:
            raise unreachable(self.base_url, exc) from exc
        return call.answer(response)

    async def _pages(self, call: Call[Paged[T]] | None) -> AsyncIterator[list[T]]:
        while call is not None:
            page = await self._send(call)
            yield page.items
            call = page.next

    # The operations (:mod:`._operations` has their parameters and docstrings).
    create = _awaiting(operations.create)
    create_or_get = _creating_or_getting(operations.create_or_get)
    create_many = _awaiting(operations.create_many)
    get = _awaiting(operations.get)
    attempts = _awaiting(operations.attempts)
    pages = _paging(operations.pages)
    list = _itemising(operations.list_)
    stats = _awaiting(operations.stats)
    flow_limits = _awaiting(operations.flow_limits)
    put_flow_limits = _awaiting(operations.put_flow_limits)
    flow_weights = _awaiting(operations.flow_weights)
    put_flow_weight = _awaiting(operations.put_flow_weight)
    flow_held = _awaiting(operations.flow_held)
    occurrences = _itemising(operations.occurrences)
    next = _awaiting(operations.next_)
    preview = _awaiting(operations.preview)
    wait = _polling(operations.wait)
    cancel = _awaiting(operations.cancel)
    retry = _awaiting(operations.retry)
    bulk_cancel = _awaiting(operations.bulk_cancel)
    bulk_retry = _awaiting(operations.bulk_retry)
    pause = _awaiting(operations.pause)
    resume = _awaiting(operations.resume)
    trigger = _awaiting(operations.trigger)
    update = _awaiting(operations.update)
    delete = _awaiting(operations.delete)
    create_workflow = _awaiting(workflows.create_workflow)
    get_workflow = _awaiting(workflows.get_workflow)
    workflow_pages = _paging(workflows.workflow_pages)
    list_workflows = _itemising(workflows.list_workflows)
    cancel_workflow = _awaiting(workflows.cancel_workflow)
    retry_workflow = _awaiting(workflows.retry_workflow)
    wait_workflow = _polling(workflows.wait_workflow)
    create_webhook = _awaiting(webhooks.create_webhook)
    list_webhooks = _awaiting(webhooks.list_webhooks)
    delete_webhook = _awaiting(webhooks.delete_webhook)
    webhook_deliveries = _awaiting(webhooks.webhook_deliveries)
