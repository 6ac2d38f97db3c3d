"""The async client (httpx.AsyncClient): runs under trio and asyncio alike (anyio)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar, Unpack

import anyio
import httpx

from . import _operations as core
from ._call import Call, Paged, connection
from ._errors import unreachable
from ._requests import job_body
from ._sync import Client
from ._types import Answers, Job, ListOptions, Page, Records, Selection

T = TypeVar("T")
C = TypeVar("C", bound=type)


def _docs_from(model: type) -> Callable[[C], C]:
    """Each method of the decorated class without a docstring takes the one of ``model``'s
    method of the same name, so that the two clients' methods are described once."""

    def decorate(cls: C) -> C:
        for name, member in vars(cls).items():
            source = getattr(model, name, None)
            if callable(member) and member.__doc__ is None and source is not None:
                member.__doc__ = source.__doc__
        return cls

    return decorate


@_docs_from(Client)
class AsyncClient:
    """The async twin of :class:`Client`: the same methods with the same arguments and
    errors, as coroutines (``pages``/``list`` are async iterators). Use it as an async
    context manager or call :meth:`aclose`. Each method's docstring is the blocking one's.
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
        self._http = httpx.AsyncClient(
            base_url=url, headers=headers, timeout=timeout, transport=transport
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

    # ------------------------------------------------------------ creating

    async def create(
        self,
        job_type: str,
        *,
        tenant_id: str,
        payload: Mapping[str, Any] | None = None,
        scheduled_at: datetime | str | None = None,
        cron: str | None = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        **schedule: Any,
    ) -> Job:
        body = job_body(
            job_type,
            tenant_id=tenant_id,
            payload=payload,
            scheduled_at=scheduled_at,
            cron=cron,
            idempotency_key=idempotency_key,
            priority=priority,
            max_attempts=max_attempts,
            **schedule,
        )
        return await self._send(core.create(body))

    async def create_many(self, bodies: Iterable[Mapping[str, Any]]) -> Answers:
        return await self._send(core.create_many(bodies))

    # ------------------------------------------------------------ reading

    async def get(self, job_id: str) -> Job:
        return await self._send(core.get(job_id))

    async def attempts(self, job_id: str) -> Records:
        return await self._send(core.attempts(job_id))

    async def pages(
        self, tenant_id: str | None = None, **options: Unpack[ListOptions]
    ) -> AsyncIterator[Page]:
        call: Call[Paged[Job]] | None = core.listing(tenant_id, **options)
        while call is not None:
            page = await self._send(call)
            yield page.items
            call = page.next

    async def list(
        self, tenant_id: str | None = None, **options: Unpack[ListOptions]
    ) -> AsyncIterator[Job]:
        async for page in self.pages(tenant_id, **options):
            for job in page:
                yield job

    async def stats(self, tenant_id: str | None = None) -> dict[str, Any]:
        return await self._send(core.stats(tenant_id))

    async def occurrences(
        self, job_id: str, *, page_size: int | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        call: Call[Paged[dict[str, Any]]] | None = core.occurrences(job_id, page_size)
        while call is not None:
            page = await self._send(call)
            for occurrence in page.items:
                yield occurrence
            call = page.next

    async def next(self, job_id: str, count: int | None = None) -> dict[str, Any]:
        return await self._send(core.next_fires(job_id, count))

    async def preview(
        self,
        cron: str,
        *,
        timezone: str | None = None,
        count: int | None = None,
        start: datetime | str | None = None,
        dst_gap: str | None = None,
        dst_fold: str | None = None,
    ) -> dict[str, Any]:
        call = core.preview(
            cron, timezone=timezone, count=count, start=start, dst_gap=dst_gap, dst_fold=dst_fold
        )
        return await self._send(call)

    # The issue names ``wait(job_id, timeout)`` for both clients; a caller's scope works too.
    async def wait(
        self,
        job_id: str,
        timeout: float = 60.0,  # noqa: ASYNC109
        *,
        interval: float = 0.2,
    ) -> Job:
        clock = anyio.current_time
        poll = core.Poll(job_id=job_id, timeout=timeout, interval=interval, clock=clock)
        while True:
            job = await self.get(job_id)
            pause = poll.pause(job)  # WaitTimeout past the deadline
            if pause is None:
                return job
            await anyio.sleep(pause)

    # ------------------------------------------------------------ acting

    async def cancel(self, job_id: str) -> Job:
        return await self._send(core.action(job_id, "cancel"))

    async def retry(
        self,
        job_id: str,
        *,
        payload: Mapping[str, Any] | None = None,
        scheduled_at: datetime | str | None = None,
    ) -> Job:
        return await self._send(core.retry(job_id, payload=payload, scheduled_at=scheduled_at))

    async def bulk_cancel(
        self,
        tenant_id: str | None = None,
        *,
        ids: Iterable[str] | None = None,
        dry_run: bool = False,
        **selection: Unpack[Selection],
    ) -> dict[str, Any]:
        return await self._send(
            core.bulk("cancel", tenant_id, ids=ids, dry_run=dry_run, **selection)
        )

    async def bulk_retry(
        self,
        tenant_id: str | None = None,
        *,
        ids: Iterable[str] | None = None,
        dry_run: bool = False,
        scheduled_at: datetime | str | None = None,
        **selection: Unpack[Selection],
    ) -> dict[str, Any]:
        call = core.bulk(
            "retry", tenant_id, ids=ids, dry_run=dry_run, scheduled_at=scheduled_at, **selection
        )
        return await self._send(call)

    async def pause(self, job_id: str) -> Job:
        return await self._send(core.action(job_id, "pause"))

    async def resume(self, job_id: str) -> Job:
        return await self._send(core.action(job_id, "resume"))

    async def trigger(self, job_id: str) -> Job:
        return await self._send(core.action(job_id, "trigger"))

    async def update(
        self,
        job_id: str,
        *,
        cron: str | None = None,
        payload: Mapping[str, Any] | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        **schedule: Any,
    ) -> Job:
        call = core.update(
            job_id,
            cron=cron,
            payload=payload,
            priority=priority,
            max_attempts=max_attempts,
            schedule=schedule,
        )
        return await self._send(call)

    async def delete(self, job_id: str) -> Job:
        return await self._send(core.delete(job_id))
