"""Store calls with a deadline for request handlers (``API_STORE_TIMEOUT``).

A request must answer well inside a client's timeout even while the store hangs. Cancelling
the store call itself is not enough: a write runs in a worker thread that is deliberately not
abandoned (the SQLite batch carries other callers' writes; a Mongo write is waited for so its
outcome is never silently dropped), so ``move_on_after`` around it would wait for the thread.

So each call runs as its own task in a nursery that outlives the request (the app's), and
the request waits for it at most ``timeout`` seconds. When the deadline passes the request
gets :class:`~jobscheduler.errors.StoreError` (503 + ``Retry-After``) and the call is
*detached*: it keeps running to its own end, bounded by the adapter's timeouts and threads
(its ``CapacityLimiter``). A detached insert that lands later has simply stored the job; a
client retrying with the same idempotencyKey gets the 409 that names it. At most
``max_detached`` calls may be detached at once; beyond that, requests get a 503 at once
instead of piling more work onto a store that is not answering.

The bound is per request, not per call: the first call a request makes starts its budget
(``timeout`` seconds) and every later call of the same request gets what is left of it. A
request that authenticates, checks a quota, inserts and audits therefore still answers within
``timeout`` (plus its own work), where per-call bounds would add up past a client's timeout.
A request served outside Quart (the create's fast path, :mod:`jobscheduler.api.routes.create`)
holds its budget in :meth:`BoundedCalls.request_budget` instead. Outside a request (no
request context, no budget), or with ``per_request=False``, each call gets the whole
``timeout``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Generic, ParamSpec, TypeVar

import trio
from quart import g, has_request_context

from jobscheduler.errors import StoreError

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

#: The store deadline of a request served outside Quart (see request_budget).
_BUDGET: ContextVar[float | None] = ContextVar("store_budget", default=None)

#: Default cap of store calls still running after their request gave up on them.
MAX_DETACHED = 256


class _Call(Generic[T]):
    __slots__ = ("detached", "done", "error", "result")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.result: T | None = None
        self.error: Exception | None = None
        self.detached = False


class BoundedCalls:
    """Runs awaitables under a deadline without abandoning them (see the module doc).

    :meth:`attach` gives it the nursery its calls run in; until then (and after the
    nursery closes) :meth:`call` raises StoreError.
    """

    def __init__(
        self, timeout: float, *, max_detached: int = MAX_DETACHED, per_request: bool = True
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.timeout = timeout
        self.per_request = per_request
        self.max_detached = max_detached
        self._nursery: trio.Nursery | None = None
        self._detached = 0

    @property
    def detached(self) -> int:
        """How many calls are still running after their caller stopped waiting."""
        return self._detached

    @contextmanager
    def request_budget(self) -> Iterator[None]:
        """Give the calls made inside the block (by this task) one budget of ``timeout``
        seconds between them, as a Quart request's calls share theirs."""
        token = _BUDGET.set(trio.current_time() + self.timeout)
        try:
            yield
        finally:
            _BUDGET.reset(token)

    def _deadline(self) -> float:
        """When the current request's store budget runs out (see the module doc)."""
        if not self.per_request:
            return trio.current_time() + self.timeout
        budget = _BUDGET.get()
        if budget is not None:
            return budget
        if not has_request_context():
            return trio.current_time() + self.timeout
        deadline: float | None = g.get("store_deadline")
        if deadline is None:
            deadline = g.store_deadline = trio.current_time() + self.timeout
        return deadline

    def attach(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    async def call(self, fn: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """``await fn(*args, **kwargs)``, or StoreError after ``timeout`` seconds.

        Exceptions of ``fn`` propagate unchanged. If the caller is cancelled or the deadline
        passes, the call goes on in the background (detached) until it finishes.
        """
        nursery = self._nursery
        if nursery is None:
            raise StoreError("store calls are not available (the app is not serving)")
        if self._detached >= self.max_detached:
            raise StoreError(f"job store is not answering ({self._detached} calls still pending)")
        state: _Call[T] = _Call()

        async def run() -> None:
            try:
                state.result = await fn(*args, **kwargs)
            except Exception as exc:
                state.error = exc
            finally:
                state.done.set()
                if state.detached:
                    self._detached -= 1
                    log.info(
                        "detached store call finished",
                        extra={
                            "call": getattr(fn, "__name__", "?"),
                            "error": None if state.error is None else str(state.error),
                        },
                    )

        try:
            nursery.start_soon(run)
        except RuntimeError:  # the nursery is closed: the app is shutting down
            raise StoreError("store calls are not available (the app is stopping)") from None
        try:
            with trio.move_on_at(self._deadline()):
                await state.done.wait()
        finally:
            if not state.done.is_set():
                state.detached = True
                self._detached += 1
        if not state.done.is_set():
            raise StoreError(f"job store did not answer within {self.timeout:g}s")
        if state.error is not None:
            raise state.error
        return state.result  # type: ignore[return-value]
