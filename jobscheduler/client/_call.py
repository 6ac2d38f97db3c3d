"""One HTTP request of the API and how its answer becomes a value (:class:`Call`), a page of
a listing with the call of the next one (:class:`Paged`), and the client's connection
settings. Error answers become the project's exceptions through :mod:`._errors`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar, cast
from urllib.parse import parse_qs, urlsplit

import attrs
import httpx

from jobscheduler.config import ClientSettings
from jobscheduler.errors import JobNotFound
from jobscheduler.observability.tracing import current_traceparent

from ._errors import raise_for_status
from ._types import Job

T = TypeVar("T")


@attrs.frozen
class Call(Generic[T]):
    """One HTTP request and how its successful answer becomes a value."""

    method: str
    path: str
    decode: Callable[[httpx.Response], T]
    params: Sequence[tuple[str, str]] = ()
    body: Any = None
    #: A 409 here means the idempotencyKey is taken (DuplicateJob), not a state conflict.
    creates: bool = False
    #: What a 404 raises (WorkflowNotFound for a workflow's calls).
    missing: type[JobNotFound] = JobNotFound
    #: Sends the caller's current span as ``traceparent`` (creates: the jobs join its trace).
    traced: bool = False

    def request(self) -> dict[str, Any]:
        """The keywords of ``httpx.Client.request`` (and ``AsyncClient.request``) for it."""
        options: dict[str, Any] = {"method": self.method, "url": self.path}
        if self.traced and (traceparent := current_traceparent()) is not None:
            options["headers"] = {"traceparent": traceparent}
        # No params at all, not an empty list: that would drop the query of a next-page URL.
        if self.params:
            options["params"] = list(self.params)
        if self.method not in ("GET", "DELETE"):
            options["json"] = self.body if self.body is not None else {}
        return options

    def answer(self, response: httpx.Response) -> T:
        """The value of a successful answer; the project's exception for an error answer."""
        raise_for_status(response, creates=self.creates, missing=self.missing)
        return self.decode(response)


def job_of(response: httpx.Response) -> Job:
    return cast(Job, response.json())


def dict_of(response: httpx.Response) -> dict[str, Any]:
    return cast(dict[str, Any], response.json())


def connection(base_url: str | None, api_key: str | None) -> tuple[str, dict[str, str]]:
    """The base URL and headers: arguments win over JOBSCHEDULER_URL/JOBSCHEDULER_API_KEY."""
    env = ClientSettings.from_env()
    url = (base_url or env.url).rstrip("/")
    key = api_key if api_key is not None else env.api_key
    headers = {"Accept": "application/json", "User-Agent": "jobscheduler-client"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return url, headers


def next_page(response: httpx.Response) -> str | None:
    """The URL of the next page from the ``Link: <...>; rel="next"`` header, if any."""
    link = response.links.get("next")
    return link.get("url") if link else None


@attrs.frozen
class Paged(Generic[T]):
    """One page of a listing and the call that reads the next one (None after the last),
    from its ``Link: rel="next"`` header; both clients loop ``page = call(page.next)``."""

    items: list[T]
    next: Call[Paged[T]] | None

    @property
    def cursor(self) -> str | None:
        """The API's cursor of the next page (None after the last): a listing started with
        it (``cursor=``) continues after this page."""
        if self.next is None:
            return None
        values = parse_qs(urlsplit(self.next.path).query).get("cursor")
        return values[0] if values else None


def paged(
    url: str, items_of: Callable[[Any], list[T]], params: Sequence[tuple[str, str]] = ()
) -> Call[Paged[T]]:
    """The ``GET`` of one page; ``items_of`` takes the items out of its JSON body."""

    def decode(response: httpx.Response) -> Paged[T]:
        following = next_page(response)
        return Paged(
            items=items_of(response.json()),
            next=None if following is None else paged(following, items_of),
        )

    return Call("GET", url, decode, params=params)
