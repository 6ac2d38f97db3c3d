"""The memory store's plumbing: the jobs table, ``start``/``close``, and the checkpoint
every call takes.

Every port method of :class:`~jobscheduler.store.memory.store.MemoryJobStore` begins with
:meth:`MemoryConnection._enter`: one trio checkpoint (a cancellation point, and a schedule
point where other tasks run, so racing calls interleave as they would around a real
store's round trip), then a check that the store is open. The rest of the call is plain
synchronous code on the tables, so each call is atomic, like one transaction.
"""

from __future__ import annotations

import trio

from jobscheduler.errors import StoreError

from .codec import JobTable


class MemoryConnection:
    """Opens and closes the store; holds the jobs table the seam mixins share.

    The data lives as long as the object: :meth:`close` refuses every later call with
    StoreError until :meth:`start` is called again, which finds the data as it was (like
    reopening a file).
    """

    def __init__(self) -> None:
        self._jobs = JobTable()
        self._started = False
        self._closed = False

    async def start(self) -> None:
        """Open the store (idempotent). No I/O: the tables exist from construction."""
        await trio.lowlevel.checkpoint()
        self._started, self._closed = True, False

    async def close(self) -> None:
        """Refuse every later call with StoreError. Safe to call twice."""
        self._closed = True
        await trio.lowlevel.checkpoint()

    async def ping(self) -> None:
        """Return if the store is open; StoreError otherwise."""
        await self._enter()

    async def _enter(self) -> None:
        """The checkpoint every call takes first; StoreError if the store is not open then."""
        await trio.lowlevel.checkpoint()
        if self._closed:
            raise StoreError("store is closed")
        if not self._started:
            raise StoreError("store is not started")
