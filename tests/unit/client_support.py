"""What the tests of the clients share: a ``call`` fixture that runs each test body with the
blocking and the async client alike against the API app in process (a module imports
:func:`client_call`, and :func:`~.api_support.fast_api` for the app it calls); and the check
of the one create a client sent to a mock transport."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
import trio

from jobscheduler.client import AsyncClient, Client

from .api_support import Api

URL = "http://app.test"

#: ``await call("method", *args, **kwargs)``.
Call = Callable[..., Any]


class ThreadToTrio(httpx.BaseTransport):
    """The blocking client's requests, sent from a worker thread, answered by an async
    transport on the test's trio loop."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def answer() -> httpx.Response:
            response = await self._inner.handle_async_request(request)
            body = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=body)

        return trio.from_thread.run(answer)


@pytest.fixture(name="call", params=["sync", "async"])
def client_call(request: pytest.FixtureRequest, api: Api) -> Call:
    """``await call("method", *args, **kwargs)``: the method of a fresh Client or AsyncClient
    on the app; a listing (``list``, ``list_workflows``) answers a list."""
    asgi = httpx.ASGITransport(app=api.client.app)

    async def with_async(method: str, *args: Any, **kwargs: Any) -> Any:
        async with AsyncClient(URL, api_key=api.token, transport=asgi) as client:
            result = getattr(client, method)(*args, **kwargs)
            if inspect.isasyncgen(result):
                return [item async for item in result]
            return await result

    def blocking(method: str, *args: Any, **kwargs: Any) -> Any:
        with Client(URL, api_key=api.token, transport=ThreadToTrio(asgi)) as client:
            result = getattr(client, method)(*args, **kwargs)
            return list(result) if inspect.isgenerator(result) else result

    async def with_sync(method: str, *args: Any, **kwargs: Any) -> Any:
        return await trio.to_thread.run_sync(lambda: blocking(method, *args, **kwargs))

    return with_async if request.param == "async" else with_sync


def assert_sent_one_create_due_now(seen: Sequence[httpx.Request], fields: dict[str, Any]) -> None:
    """``seen`` is one ``POST /jobs`` with a fresh client key, due now, and ``fields``."""
    (request,) = seen
    assert (request.method, request.url.path) == ("POST", "/jobs")
    body = json.loads(request.content)
    assert body["idempotencyKey"].startswith("client-")
    assert body["scheduledAt"].endswith("Z")
    assert {k: body[k] for k in fields} == fields
