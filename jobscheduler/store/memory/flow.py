"""The memory store's flow control: fair candidates, slot claims, rate buckets, limits,
weights and the leader's report."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import attrs

from jobscheduler.domain.flow import FlowReport, LimitOverride, TenantWeight
from jobscheduler.domain.model import Job, Status, utc
from jobscheduler.domain.states import claim_fields
from jobscheduler.store.query import DUE_ONE_OFF, Candidate, Exclusions, Pick, fair_group

from .codec import job_out, keep
from .conn import MemoryConnection


def fair_candidates_of(
    jobs: Iterable[Job], now: datetime, per_group: int, exclude: Exclusions | None
) -> list[Job]:
    """The port's ``fair_candidates`` over ``jobs`` (see :class:`FlowControl`)."""
    due = DUE_ONE_OFF.due(now)
    groups: dict[tuple[int, str, str], list[Job]] = {}
    for job in jobs:
        if due.matches(job) and (exclude is None or not exclude.excludes(job)):
            groups.setdefault(fair_group(job), []).append(job)
    out: list[Job] = []
    for level in sorted({priority for priority, _, _ in groups}, reverse=True):
        for group in sorted(g for g in groups if g[0] == level):
            members = sorted(groups[group], key=lambda job: (job.scheduled_at, job.id))
            out.extend(members[:per_group])
        if len(out) >= per_group:
            break
    return out


class MemoryFlowMixin(MemoryConnection):
    """Flow state in dicts; the slots are the jobs table's unique index."""

    def __init__(self) -> None:
        super().__init__()
        self._buckets: dict[str, datetime] = {}
        self._limit_overrides: dict[tuple[str, str], LimitOverride] = {}
        self._weights: dict[str, TenantWeight] = {}
        self._report: FlowReport | None = None

    async def fair_candidates(
        self, now: datetime, per_group: int, exclude: Exclusions | None = None
    ) -> list[Candidate]:
        await self._enter()
        return [
            Candidate.of(job) for job in fair_candidates_of(self._jobs, now, per_group, exclude)
        ]

    async def claim_picks(self, now: datetime, picks: Sequence[Pick]) -> list[Job]:
        await self._enter()
        due = DUE_ONE_OFF.due(now)
        fields = claim_fields(now)
        claimed: list[Job] = []
        for pick in picks:
            job = self._jobs.get(pick.job_id)
            if job is None or not due.matches(job):
                continue
            own = fields if pick.start_at is None else claim_fields(now, pick.start_at)
            queued = attrs.evolve(job, **own, key_slot=pick.key_slot, type_slot=pick.type_slot)
            if self._jobs.conflict(queued, replacing=job.id) is not None:
                continue  # another job holds the slot
            self._jobs.replace(queued)
            claimed.append(job_out(queued))
        return claimed

    async def queued_by_type(self, now: datetime) -> dict[str, int]:
        await self._enter()
        counts: dict[str, int] = {}
        for job in self._jobs:
            if job.status is Status.QUEUED and job.queued_at is not None and job.queued_at <= now:
                counts[job.job_type] = counts.get(job.job_type, 0) + 1
        return counts

    async def held_slots(self) -> list[str]:
        await self._enter()
        return self._jobs.slots()

    async def buckets(self, scopes: Sequence[str]) -> dict[str, datetime]:
        await self._enter()
        return {scope: self._buckets[scope] for scope in scopes if scope in self._buckets}

    async def put_bucket(self, scope: str, expect: datetime | None, tat: datetime) -> bool:
        await self._enter()
        current = self._buckets.get(scope)
        if (current is None) != (expect is None) or (expect is not None and current != utc(expect)):
            return False
        self._buckets[scope] = utc(tat)
        return True

    async def limit_overrides(self, tenant_id: str | None = None) -> list[LimitOverride]:
        await self._enter()
        return [
            self._limit_overrides[key]
            for key in sorted(self._limit_overrides)
            if tenant_id is None or key[0] == tenant_id
        ]

    async def put_limit_override(self, override: LimitOverride) -> None:
        await self._enter()
        key = (override.tenant_id, override.job_type)
        if override.limits.empty:
            self._limit_overrides.pop(key, None)
        else:
            self._limit_overrides[key] = override

    async def tenant_weights(self) -> list[TenantWeight]:
        await self._enter()
        return [self._weights[tenant] for tenant in sorted(self._weights)]

    async def put_tenant_weight(self, weight: TenantWeight) -> None:
        await self._enter()
        if weight.weight == 1:
            self._weights.pop(weight.tenant_id, None)
        else:
            self._weights[weight.tenant_id] = weight

    async def put_flow_report(self, report: FlowReport) -> None:
        await self._enter()
        self._report = keep(report)

    async def flow_report(self) -> FlowReport | None:
        await self._enter()
        return self._report
