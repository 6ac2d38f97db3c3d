"""Per-tenant quotas of the API: jobs not yet finished, and the rate of creates.

- **Unfinished jobs** (``QUOTA_MAX_UNFINISHED``): each API process keeps a per-tenant count
  read from the store at most once a second (one ``COUNT`` per tenant per second, not one per
  create) plus the creates it admitted since. Precision: a tenant can exceed the limit by
  what *other* API processes admit within one refresh interval; jobs finishing are only
  noticed at the next refresh (the count errs on the side of refusing).
- **Create rate** (``QUOTA_CREATE_RATE`` per second, ``QUOTA_CREATE_BURST``): a token bucket
  per API key (per tenant when authentication is off), per process; a batch create takes one
  token per job.

Both refuse with :class:`QuotaExceeded` (429 with ``Retry-After``) and count the refusal in
``api_quota_rejections_total{reason}``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

import attrs
import trio

from jobscheduler.errors import JobSchedulerError, QuotaExceeded

log = logging.getLogger(__name__)

#: How old the store's count of a tenant's unfinished jobs may get before a re-read.
COUNT_REFRESH = 1.0
#: Longest a create waits for the store's count; past it (or on a store error) the last
#: count stands (none yet: the create is admitted), so a slow store does not also stall
#: creates on their quota check.
COUNT_WAIT = 0.5
#: Retry-After (seconds) of an unfinished-jobs refusal: wait for jobs to finish.
UNFINISHED_RETRY_AFTER = 5


@attrs.define
class TokenBucket:
    """``rate`` tokens per second up to ``burst``; starts full."""

    rate: float
    burst: float
    tokens: float
    updated: float

    def take(self, n: int, now: float) -> float:
        """Take ``n`` tokens; returns 0.0 on success, else the seconds until they exist
        (nothing is taken then). A request larger than the burst can never succeed: it is
        refused with the time a full bucket takes."""
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if n <= self.tokens:
            self.tokens -= n
            return 0.0
        if n > self.burst:
            return self.burst / self.rate
        return (n - self.tokens) / self.rate


@attrs.define
class _Count:
    value: int
    read_at: float


class Quotas:
    """The quota checks of one API process (see the module docstring)."""

    def __init__(
        self,
        *,
        count_unfinished: Callable[[str], Awaitable[int]] | None,
        max_unfinished: int,
        create_rate: float,
        create_burst: int,
        on_reject: Callable[[str], None],
        timer: Callable[[], float] = trio.current_time,
        max_buckets: int = 100_000,
    ) -> None:
        self._count_unfinished = count_unfinished
        self._max_unfinished = max_unfinished
        self._rate = create_rate
        self._burst = float(create_burst)
        self._on_reject = on_reject
        self._timer = timer
        self._buckets: dict[str, TokenBucket] = {}
        self._max_buckets = max_buckets
        self._counts: dict[str, _Count] = {}
        self._count_locks: dict[str, trio.Lock] = {}

    def _bucket(self, who: str, now: float) -> TokenBucket:
        bucket = self._buckets.get(who)
        if bucket is None:
            if len(self._buckets) >= self._max_buckets:
                self._buckets.clear()  # bounded memory; a refill is the worst case
            bucket = TokenBucket(self._rate, self._burst, self._burst, now)
            self._buckets[who] = bucket
        return bucket

    def _reject(self, message: str, reason: str, retry_after: float) -> QuotaExceeded:
        self._on_reject(reason)
        return QuotaExceeded(message, reason=reason, retry_after=max(1, math.ceil(retry_after)))

    async def admit_creates(self, *, who: str, tenant: str, count: int) -> None:
        """Admit ``count`` new jobs of ``tenant`` created by ``who`` (a key id, or the tenant
        when authentication is off), or raise QuotaExceeded. Admitted jobs count at once
        against the tenant's unfinished limit."""
        now = self._timer()
        if self._rate > 0:
            wait = self._bucket(who, now).take(count, now)
            if wait > 0:
                raise self._reject(
                    f"create rate quota exceeded ({self._rate:g} jobs/s, burst "
                    f"{self._burst:g}); retry later",
                    "rate",
                    wait,
                )
        if self._max_unfinished > 0 and self._count_unfinished is not None:
            current = await self._unfinished(tenant, now)
            if current.value + count > self._max_unfinished:
                raise self._reject(
                    f"tenant {tenant!r} has {current.value} unfinished jobs; the quota is "
                    f"{self._max_unfinished}",
                    "unfinished",
                    UNFINISHED_RETRY_AFTER,
                )
            current.value += count

    def forget_creates(self, *, tenant: str, count: int) -> None:
        """Give back ``count`` admitted creates that were not stored (duplicates, errors)."""
        current = self._counts.get(tenant)
        if current is not None:
            current.value = max(0, current.value - count)

    async def _unfinished(self, tenant: str, now: float) -> _Count:
        current = self._counts.get(tenant)
        if current is not None and now - current.read_at < COUNT_REFRESH:
            return current
        lock = self._count_locks.setdefault(tenant, trio.Lock())
        async with lock:
            current = self._counts.get(tenant)
            if current is not None and self._timer() - current.read_at < COUNT_REFRESH:
                return current
            assert self._count_unfinished is not None
            read_at = self._timer()
            value: int | None = None
            with trio.move_on_after(COUNT_WAIT):
                try:
                    value = await self._count_unfinished(tenant)
                except JobSchedulerError as exc:
                    log.warning(
                        "unfinished count not read", extra={"tenant": tenant, "error": str(exc)}
                    )
            if value is None:
                # Keep the last count (or none: admit) and try again after COUNT_REFRESH.
                value = current.value if current is not None else 0
            if len(self._counts) >= self._max_buckets:
                self._counts.clear()
            current = _Count(value, read_at)
            self._counts[tenant] = current
            return current
