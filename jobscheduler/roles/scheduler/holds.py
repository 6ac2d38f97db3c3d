"""What the leader's fair claims held back, and why (:class:`HeldBook`).

Each claim records a :class:`~jobscheduler.domain.flow.Hold` per scope it held jobs of (a
full key or type, a spent rate, a type's room ahead of its executors), counting how many
it held (:class:`HoldTally`). The book keeps the latest holds -- with those of scopes the
claim left out of its read, which are still held -- counts them in the metrics, and makes
the report the job pages and the Overview read: stored once a second while something is
held (and once more after), and at once when a limit of a type starts or stops holding its
jobs. Which keys of a limit are held, and a type's room ahead, which change with nearly
every claim while jobs wait for them, wait for the second.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta

import attrs

from jobscheduler.domain.flow import FlowReport, Hold, HoldReason, Rate, hold_text
from jobscheduler.observability.metrics import Metrics
from jobscheduler.store.query import Candidate, Exclusions

#: Seconds between two writes of the leader's report (when something is held).
REPORT_EVERY = 1.0


class HoldTally:
    """One claim's holds as it makes them: a :class:`Hold` per scope, built for its first
    job, and how many jobs each held (a claim may hold hundreds of one type's candidates for
    room: counting them costs no new record each)."""

    __slots__ = ("_first", "_waiting")

    def __init__(self) -> None:
        self._first: dict[str, Hold] = {}
        self._waiting: Counter[str] = Counter()

    def add(
        self,
        scope: str,
        reason: HoldReason,
        job: Candidate,
        used: int = 0,
        limit: int | Rate | None = None,
    ) -> None:
        """Count ``job`` as held by ``scope`` for ``reason`` (``used`` of ``limit`` taken)."""
        self._waiting[scope] += 1
        if scope in self._first:
            return
        per_key = reason in (HoldReason.CONCURRENCY, HoldReason.KEY_RATE_LIMIT)
        key = job.concurrency_key if per_key else None
        self._first[scope] = Hold(
            scope=scope,
            reason=reason,
            tenant_id="" if reason is HoldReason.CAPACITY else job.tenant_id,
            job_type=job.job_type,
            key=key,
            text=hold_text(reason, job_type=job.job_type, key=key, used=used, limit=limit),
            waiting=1,
        )

    def holds(self) -> dict[str, Hold]:
        """Each scope's hold, counting every job it held."""
        return {
            scope: attrs.evolve(hold, waiting=self._waiting[scope])
            for scope, hold in self._first.items()
        }


class HeldBook:
    """The latest holds, their metrics and the report (see the module doc)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._holds: dict[str, Hold] = {}
        self._reported: datetime | None = None
        self._report_dirty = False
        #: Whether the last report stored held something (the next one clears it).
        self._shown = False

    def update(self, fresh: Mapping[str, Hold], exclude: Exclusions) -> dict[str, Hold]:
        """The holds after a claim that held ``fresh`` and left ``exclude`` out of its
        read (what was last seen of those is kept); counted in the metrics."""
        metrics = self._metrics
        for hold in fresh.values():
            metrics.scheduler_held.labels(reason=hold.reason.value).inc(hold.waiting)
        kept = {
            scope: hold
            for scope, hold in self._holds.items()
            if scope not in fresh and _still_excluded(hold, exclude)
        }
        holds = {**kept, **fresh}
        if _limits_holding(holds) != _limits_holding(self._holds):
            self._report_dirty = True
        self._holds = holds
        waiting: Counter[str] = Counter()
        for hold in holds.values():
            waiting[hold.reason.value] += hold.waiting
        for reason in HoldReason:
            metrics.scheduler_waiting.labels(reason=reason.value).set(waiting[reason.value])
        return holds

    def report_due(self, now: datetime) -> FlowReport | None:
        """The report to store now, if one is due (see the module doc)."""
        recent = self._reported is not None and now - self._reported < timedelta(
            seconds=REPORT_EVERY
        )
        if not self._report_dirty and (recent or not (self._holds or self._shown)):
            return None
        self._reported, self._report_dirty = now, False
        self._shown = bool(self._holds)
        return FlowReport(at=now, holds=tuple(sorted(self._holds.values(), key=lambda h: h.scope)))


def _limits_holding(holds: Mapping[str, Hold]) -> set[tuple[HoldReason, str, str]]:
    """The limits of ``holds`` (not a type's room ahead): each reason of a type in a tenant,
    whichever of its keys it holds."""
    return {
        (hold.reason, hold.tenant_id, hold.job_type)
        for hold in holds.values()
        if hold.reason is not HoldReason.CAPACITY
    }


def _still_excluded(hold: Hold, exclude: Exclusions) -> bool:
    if hold.reason is HoldReason.CAPACITY:
        return False  # never left out of the read: held again, or not, by each claim
    if hold.key is not None:
        return (hold.tenant_id, hold.job_type, hold.key) in exclude.keys
    return (hold.tenant_id, hold.job_type) in exclude.types
