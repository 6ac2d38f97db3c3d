"""The room ahead of the executors: how many jobs of a type the leader keeps queued for them.

A type's room ahead is twice the slots its live executors report (``CLAIM_AHEAD`` when none
reports, and at most that), so a later tenant's jobs wait behind a few claimed jobs, not a
whole backlog. The fair claim needs the queued counts only when a claim could reach a room:
between counts, the last count plus what this leader claimed since bounds them (executors
only take queued jobs away; another leader's claims in a handoff only make a room soft).
A pass's first claim asks for the whole room of the types it last read, and takes what the
executors made of it since, in one round trip.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime

from jobscheduler.domain.model import Job
from jobscheduler.store import JobStore
from jobscheduler.store.query import Candidate


class Room:
    """The leader's view of each type's room ahead (see the module doc)."""

    def __init__(self, claim_ahead: int) -> None:
        self._cap = claim_ahead
        #: Slots per job type reported by live executors (set by the claimer's refresh).
        self.capacity: Mapping[str, int] = {}
        #: Per job type, the most jobs that can be queued. None: count them.
        self._queued_at_most: Counter[str] | None = None
        #: The job types of the last claim's candidates.
        self._seen: set[str] = set()

    def ahead(self, job_type: str) -> int:
        """How many jobs of ``job_type`` may be queued at once."""
        slots = self.capacity.get(job_type)
        return self._cap if slots is None else max(1, min(self._cap, 2 * slots))

    def whole(self) -> int:
        """The room ahead of the types of the last claim's candidates, together (0 before
        a claim has read any)."""
        return sum(self.ahead(t) for t in self._seen)

    async def left(
        self, store: JobStore, candidates: Iterable[Candidate], now: datetime, *, recount: bool
    ) -> dict[str, int]:
        """Per job type, minus how many are queued (the room ahead is added on use): counted
        in ``store`` when ``recount`` or when claiming every candidate could pass a room by
        the bound, else the bound."""
        queued = self._queued_at_most
        wanted = Counter(job.job_type for job in candidates)
        self._seen = set(wanted)
        if (
            recount
            or queued is None
            or any(queued[t] + n > self.ahead(t) for t, n in wanted.items())
        ):
            queued = self._queued_at_most = Counter(await store.queued_by_type(now))
        room: dict[str, int] = defaultdict(int)
        for job_type, n in queued.items():
            room[job_type] -= n
        return room

    def claimed(self, jobs: Iterable[Job]) -> None:
        """``jobs`` were queued by this leader: the bound grows by them."""
        if self._queued_at_most is not None:
            self._queued_at_most.update(job.job_type for job in jobs)
