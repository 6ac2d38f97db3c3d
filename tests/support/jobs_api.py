"""Jobs over the HTTP API in tests, done as the docs tell clients to: a 503 ("the store did
not answer in time") is retried after its ``Retry-After`` with the same request, so a create
keeps its idempotency key; a create whose earlier try landed then answers 409 naming the job,
which is read back. And waiting until a job reaches a state."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import httpx
import trio

#: How long a helper keeps retrying 503s before it gives up (a loaded machine's store can be
#: slow for a while; a test that must see the 503 itself sends its own request).
RETRY_503_FOR = 60.0


async def send(http: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request, sent again after each 503 (waiting its ``Retry-After``, 1 s by default)
    for up to :data:`RETRY_503_FOR` seconds; the last answer."""
    deadline = trio.current_time() + RETRY_503_FOR
    while True:
        response = await http.request(method, url, **kwargs)
        if response.status_code != 503 or trio.current_time() >= deadline:
            return response
        await trio.sleep(float(response.headers.get("Retry-After", "1")))


async def create_job(http: httpx.AsyncClient, api: Api, body: dict[str, Any]) -> dict[str, Any]:
    """``POST /jobs`` with ``body``, retried on a 503 with the same key; the stored job (read
    back when an earlier try stored it and the retry met the 409 of its own key)."""
    response = await send(http, "POST", f"{api.url}/jobs", json=body)
    if response.status_code == 409 and "jobId" in response.json():
        response = await send(http, "GET", f"{api.url}/jobs/{response.json()['jobId']}")
        stored: dict[str, Any] = response.json()
        assert stored.get("idempotencyKey") == body.get("idempotencyKey"), stored
        return stored
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


class Api(Protocol):
    """A process serving the API (a ``dev`` server, an api role process)."""

    @property
    def url(self) -> str: ...


async def wait_for_state(
    http: httpx.AsyncClient,
    url: str,
    predicate: Callable[[dict[str, Any]], bool],
    *,
    what: str,
    timeout: float,
    interval: float,
    check: Callable[[], None] | None = None,
    shown: Callable[[dict[str, Any]], dict[str, Any]] = lambda state: state,
) -> dict[str, Any]:
    """Poll ``GET url`` until ``predicate(state)``; fail naming ``what``, with the last state
    seen (as ``shown`` puts it). ``check`` runs before each poll."""
    last: dict[str, Any] = {}
    try:
        with trio.fail_after(timeout):
            while True:
                if check is not None:
                    check()
                response = await send(http, "GET", url)
                assert response.status_code == 200, response.text
                last = response.json()
                if predicate(last):
                    return last
                await trio.sleep(interval)
    except trio.TooSlowError:
        raise AssertionError(
            f"{what} never satisfied the condition within {timeout}s; "
            f"last state: {json.dumps(shown(last))}"
        ) from None


async def wait_for_job(
    http: httpx.AsyncClient,
    api: Api,
    job_id: str,
    predicate: Callable[[dict[str, Any]], bool],
    timeout: float = 20.0,
    interval: float = 0.05,
    check: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Poll ``GET /jobs/{id}`` until ``predicate(job)``; fail with the last state seen.
    ``check`` runs before each poll (e.g. a check that no process died unasked)."""
    url = f"{api.url}/jobs/{job_id}"
    return await wait_for_state(
        http, url, predicate, what=f"job {job_id}", timeout=timeout, interval=interval, check=check
    )
