"""Jobs over the HTTP API in tests: waiting until a job reaches a state."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import httpx
import trio


class Api(Protocol):
    """A process serving the API (a ``dev`` server, an api role process)."""

    @property
    def url(self) -> str: ...


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
    last: dict[str, Any] = {}
    try:
        with trio.fail_after(timeout):
            while True:
                if check is not None:
                    check()
                response = await http.get(f"{api.url}/jobs/{job_id}")
                assert response.status_code == 200, response.text
                last = response.json()
                if predicate(last):
                    return last
                await trio.sleep(interval)
    except trio.TooSlowError:
        raise AssertionError(
            f"job {job_id} never satisfied the condition within {timeout}s; "
            f"last state: {json.dumps(last)}"
        ) from None
