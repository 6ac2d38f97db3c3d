"""The API client that task handles enqueue through: one per process, built on first use.

``send_email.enqueue(...)`` must not open a connection per call (a TCP handshake and a
fresh connection pool cost more than the create itself), nor build a client at import time
(nothing would own it). A :class:`Connection` holds the settings and builds its blocking
:class:`~jobscheduler.client.Client` on first use, then reuses it (keep-alive) for every
call of every handle of the process; a forked child builds its own. The async client is
bound to an event loop (its pooled connections belong to it), so there is one per running
loop -- trio or asyncio -- built on first use there.

Settings come from the arguments, else the environment as the client reads it
(:class:`jobscheduler.config.ClientSettings`: ``JOBSCHEDULER_URL``,
``JOBSCHEDULER_API_KEY``, ``JOBSCHEDULER_TENANT``). Nothing here does I/O until a handle
sends something; :func:`jobscheduler.client` and ``httpx`` are imported then too, so a role
that only runs handlers never loads them.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

    from jobscheduler.client import AsyncClient, Client

#: How long a handle keeps retrying a create that met a 503 or no answer, by default.
DEFAULT_RETRY_FOR = 30.0


def _loop_identity() -> object:
    """The running event loop (asyncio) or run (trio) an async client is bound to."""
    import sniffio

    library = sniffio.current_async_library()
    if library == "trio":
        import trio

        return trio.lowlevel.current_trio_token()
    import asyncio

    return asyncio.get_running_loop()


class Connection:
    """Where handles send their jobs, and the clients they share (see the module doc).

    ``url``, ``api_key`` and ``tenant_id`` default to the environment's
    (``JOBSCHEDULER_URL``, ``JOBSCHEDULER_API_KEY``, ``JOBSCHEDULER_TENANT``); a job
    enqueued without ``tenant_id`` goes to ``tenant_id``, else to the API key's own
    tenant. ``transport``/``async_transport`` replace httpx's (tests). ``retry_for`` bounds
    the retries of a create that met a 503 or no answer.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        tenant_id: str | None = None,
        timeout: float = 10.0,
        retry_for: float = DEFAULT_RETRY_FOR,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if retry_for < 0:
            raise ValueError(f"retry_for: must not be negative, got {retry_for!r}")
        self._url = url
        self._api_key = api_key
        self._tenant_id = tenant_id
        self._timeout = timeout
        self.retry_for = retry_for
        self._transport = transport
        self._async_transport = async_transport
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._client_pid = 0
        self._async: tuple[object, AsyncClient] | None = None
        self._registered_exit = False

    @property
    def tenant_id(self) -> str | None:
        """The tenant of jobs enqueued without one (the argument, else
        ``JOBSCHEDULER_TENANT``); None: the API key's tenant."""
        if self._tenant_id is not None:
            return self._tenant_id
        from jobscheduler.config import ClientSettings

        return ClientSettings.from_env().tenant_id

    def client(self) -> Client:
        """The blocking client of this process, built on first use and then reused."""
        client = self._client
        if client is not None and self._client_pid == os.getpid():
            return client
        with self._lock:
            if self._client is None or self._client_pid != os.getpid():
                from jobscheduler.client import Client

                # A client inherited through fork shares its sockets with the parent: leave
                # it alone (closing it would close the parent's connections) and start anew.
                self._client = Client(
                    self._url,
                    api_key=self._api_key,
                    timeout=self._timeout,
                    transport=self._transport,
                )
                self._client_pid = os.getpid()
                if not self._registered_exit:
                    atexit.register(self.close)
                    self._registered_exit = True
            return self._client

    def async_client(self) -> AsyncClient:
        """The async client of the running event loop, built on first use there."""
        loop = _loop_identity()
        current = self._async
        if current is not None and current[0] is loop:
            return current[1]
        from jobscheduler.client import AsyncClient

        client = AsyncClient(
            self._url,
            api_key=self._api_key,
            timeout=self._timeout,
            transport=self._async_transport,
        )
        # A client of a loop that has ended is dropped: its connections died with the loop.
        self._async = (loop, client)
        return client

    def close(self) -> None:
        """Close the blocking client (a later call builds a new one)."""
        with self._lock:
            client, self._client = self._client, None
            if client is not None and self._client_pid == os.getpid():
                client.close()

    async def aclose(self) -> None:
        """Close the async client of the running loop (e.g. on an app's shutdown)."""
        current, self._async = self._async, None
        if current is not None and current[0] is _loop_identity():
            await current[1].aclose()


#: The connection of every registry that was not given one of its own: one per process.
shared = Connection()


__all__ = ["DEFAULT_RETRY_FOR", "Connection", "shared"]
