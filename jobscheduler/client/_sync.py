"""The blocking client (httpx.Client): how it sends a call, follows pages and sleeps between
polls. Its methods are the operations of :mod:`._operations`, bound to it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Concatenate, ParamSpec, TypeVar

import httpx

from jobscheduler.errors import DuplicateJob

from . import _operations as operations
from . import _webhooks as webhooks
from . import _workflows as workflows
from ._call import Call, Paged, connection
from ._errors import unreachable
from ._operations import CreateOrGet, Poll, as_method
from ._transport import sync_transport
from ._types import Job

P = ParamSpec("P")
T = TypeVar("T")


def _returning(operation: Callable[P, Call[T]]) -> Callable[Concatenate[Client, P], T]:
    """The method that sends the operation's call and returns its answer."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._send(operation(*args, **kwargs))

    return as_method(method, operation)


def _paging(
    operation: Callable[P, Call[Paged[T]]],
) -> Callable[Concatenate[Client, P], Iterator[list[T]]]:
    """The method that yields the pages of the operation's listing."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[list[T]]:
        yield from self._pages(operation(*args, **kwargs))

    return as_method(method, operation)


def _itemising(
    operation: Callable[P, Call[Paged[T]]],
) -> Callable[Concatenate[Client, P], Iterator[T]]:
    """The method that yields the items of the operation's listing, a page at a time."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        for items in self._pages(operation(*args, **kwargs)):
            yield from items

    return as_method(method, operation)


def _polling(operation: Callable[P, Poll]) -> Callable[Concatenate[Client, P], Job]:
    """The method that polls the job until it is final (the operation's :class:`Poll`)."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Job:
        poll = operation(*args, **kwargs)
        deadline = time.monotonic() + poll.timeout
        while True:
            job = self._send(poll.call)
            pause = poll.pause(job, left=deadline - time.monotonic())  # WaitTimeout past it
            if pause is None:
                return job
            time.sleep(pause)

    return as_method(method, operation)


def _creating_or_getting(
    operation: Callable[P, CreateOrGet],
) -> Callable[Concatenate[Client, P], tuple[Job, bool]]:
    """The method that creates, or gets the job holding the key (the operation's plan)."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> tuple[Job, bool]:
        plan = operation(*args, **kwargs)
        try:
            return self._send(plan.create), True
        except DuplicateJob as exc:
            if exc.existing_id is None:
                raise
            return self._send(plan.get(exc.existing_id)), False

    return as_method(method, operation)


class Client:
    """A blocking client of the jobscheduler HTTP API; one method per operation.

    ``base_url`` and ``api_key`` default to ``JOBSCHEDULER_URL`` (else
    ``http://127.0.0.1:8080``) and ``JOBSCHEDULER_API_KEY``. Error answers raise the
    project's exceptions (:mod:`jobscheduler.errors`): ValidationError (400), Unauthorized
    (401), Forbidden (403), JobNotFound (404), DuplicateJob (409 on create, with
    ``existing_id``), InvalidTransition (other 409s), RateLimited (429), ServiceUnavailable (503);
    ApiUnreachable when the API cannot be reached. Use it as a context manager or call
    :meth:`close`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        url, headers = connection(base_url, api_key)
        self.base_url = url
        # Without a transport of the caller's, httpx's own, each request in one write.
        self._http = httpx.Client(
            base_url=url,
            headers=headers,
            timeout=timeout,
            transport=transport if transport is not None else sync_transport(),
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[T]) -> T:
        try:
            response = self._http.request(**call.request())
        except httpx.TransportError as exc:
            raise unreachable(self.base_url, exc) from exc
        return call.answer(response)

    def _pages(self, call: Call[Paged[T]] | None) -> Iterator[list[T]]:
        while call is not None:
            page = self._send(call)
            yield page.items
            call = page.next

    # The operations (:mod:`._operations` has their parameters and docstrings).
    create = _returning(operations.create)
    create_or_get = _creating_or_getting(operations.create_or_get)
    create_many = _returning(operations.create_many)
    get = _returning(operations.get)
    attempts = _returning(operations.attempts)
    pages = _paging(operations.pages)
    list = _itemising(operations.list_)
    stats = _returning(operations.stats)
    flow_limits = _returning(operations.flow_limits)
    put_flow_limits = _returning(operations.put_flow_limits)
    flow_weights = _returning(operations.flow_weights)
    put_flow_weight = _returning(operations.put_flow_weight)
    flow_held = _returning(operations.flow_held)
    occurrences = _itemising(operations.occurrences)
    next = _returning(operations.next_)
    preview = _returning(operations.preview)
    wait = _polling(operations.wait)
    cancel = _returning(operations.cancel)
    retry = _returning(operations.retry)
    bulk_cancel = _returning(operations.bulk_cancel)
    bulk_retry = _returning(operations.bulk_retry)
    pause = _returning(operations.pause)
    resume = _returning(operations.resume)
    trigger = _returning(operations.trigger)
    update = _returning(operations.update)
    delete = _returning(operations.delete)
    create_workflow = _returning(workflows.create_workflow)
    get_workflow = _returning(workflows.get_workflow)
    workflow_pages = _paging(workflows.workflow_pages)
    list_workflows = _itemising(workflows.list_workflows)
    cancel_workflow = _returning(workflows.cancel_workflow)
    retry_workflow = _returning(workflows.retry_workflow)
    wait_workflow = _polling(workflows.wait_workflow)
    create_webhook = _returning(webhooks.create_webhook)
    list_webhooks = _returning(webhooks.list_webhooks)
    delete_webhook = _returning(webhooks.delete_webhook)
    webhook_deliveries = _returning(webhooks.webhook_deliveries)
