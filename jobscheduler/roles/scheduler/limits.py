"""The limits the leader's fair claim applies (:class:`LimitBook`): each job type's, as its
handler declares them, with an admin's override in a tenant over them; the tenants' weights;
the executors' slots per type (for the room ahead of them); and how far ahead a rated job
may be claimed (``RATE_AHEAD``).

The overrides, weights and slots are read from the store again every :data:`REFRESH`
seconds; between reads, the answers are kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta

from jobscheduler.domain.flow import Limits, Rate, scope_parts
from jobscheduler.store import JobStore

from .room import Room

#: Seconds between two reads of the overrides, weights and executors' capacity.
REFRESH = 1.0
#: The limits of a type that declares none and has no override.
NO_LIMITS = Limits()


class LimitBook:
    """What limits each (tenant, job type) has, and the weights (see the module doc)."""

    def __init__(self, defaults: Mapping[str, Limits], room: Room, rate_ahead: float) -> None:
        self._defaults = defaults
        self._room = room
        self._rate_ahead = timedelta(seconds=rate_ahead)
        self._overrides: dict[tuple[str, str], Limits] = {}
        #: limits_of's answers since the overrides were last read.
        self._limits: dict[tuple[str, str], Limits] = {}
        #: Each tenant's weight in the fair order (1 when not set).
        self.weights: dict[str, int] = {}
        self._refreshed: datetime | None = None

    def limits_of(self, tenant_id: str, job_type: str) -> Limits:
        found = self._limits.get((tenant_id, job_type))
        if found is None:
            base = self._defaults.get(job_type, NO_LIMITS)
            override = self._overrides.get((tenant_id, job_type))
            found = base if override is None else override.over(base)
            self._limits[(tenant_id, job_type)] = found
        return found

    @property
    def limited(self) -> bool:
        """Whether any limit is declared or overridden."""
        return bool(self._defaults or self._overrides)

    async def refresh(self, store: JobStore, now: datetime) -> bool:
        """Read the overrides, weights and capacity again if :data:`REFRESH` has passed
        (True: it did)."""
        if self._refreshed is not None and now - self._refreshed < timedelta(seconds=REFRESH):
            return False
        self._overrides = {
            (o.tenant_id, o.job_type): o.limits for o in await store.limit_overrides()
        }
        self._limits = {}
        self.weights = {w.tenant_id: w.weight for w in await store.tenant_weights()}
        capacity: Counter[str] = Counter()
        for beat in await store.live_workers(now):
            for job_type in beat.job_types if beat.capacity else ():
                capacity[job_type] += beat.capacity
        self._room.capacity = dict(capacity)
        self._refreshed = now
        return True

    def rate_of(self, scope: str) -> Rate:
        """The rate of a rate bucket's scope."""
        _, parts = scope_parts(scope)
        limits = self.limits_of(parts[0], parts[1])
        rate = limits.rate_limit if len(parts) == 2 else limits.key_rate_limit
        assert rate is not None, scope
        return rate

    def burst_of(self, scope: str) -> int:
        _, parts = scope_parts(scope)
        return self.limits_of(parts[0], parts[1]).burst_of(self.rate_of(scope))

    @property
    def claims_ahead(self) -> bool:
        """Whether a rated job may be claimed ahead of its start at all (``RATE_AHEAD``)."""
        return self._rate_ahead > timedelta(0)

    def ahead_of(self, limits: Limits) -> timedelta:
        """How far ahead a job under ``limits`` may be claimed for a start its rates give it
        (``RATE_AHEAD``): not at all if it takes a slot, which it would hold meanwhile."""
        if limits.max_running is not None or limits.concurrency is not None:
            return timedelta(0)
        return self._rate_ahead

    def ahead_of_scope(self, scope: str) -> timedelta:
        """:meth:`ahead_of` for the limits of a rate bucket's scope."""
        _, parts = scope_parts(scope)
        return self.ahead_of(self.limits_of(parts[0], parts[1]))
