"""Why a due job is held back, in words a person reads on its page, and the leader's report
of what it holds (stored, so the API and the Overview can show it)."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from jobscheduler.domain.model import format_time, parse_time


class HoldReason(enum.StrEnum):
    """The label of ``scheduler_held_total{reason}`` and of the waiting gauge."""

    #: The job's concurrency key has all its slots taken.
    CONCURRENCY = "concurrency"
    #: The job type's ``max_running`` slots are all taken.
    MAX_RUNNING = "max_running"
    #: The job type's rate is spent for now.
    RATE_LIMIT = "rate_limit"
    #: The job's key's rate is spent for now.
    KEY_RATE_LIMIT = "key_rate_limit"
    #: As many jobs of the type are queued as its executors can start soon.
    CAPACITY = "capacity"


def hold_text(
    reason: HoldReason, *, job_type: str, key: str | None, used: int = 0, limit: Any = None
) -> str:
    """``waiting: customer-42 has 1 of 1 running``, ``rate limited: send-email 100/s``, ..."""
    if reason is HoldReason.CONCURRENCY:
        return f"waiting: {key} has {used} of {limit} running"
    if reason is HoldReason.MAX_RUNNING:
        return f"waiting: {job_type} has {used} of {limit} running"
    if reason is HoldReason.RATE_LIMIT:
        return f"rate limited: {job_type} {limit}"
    if reason is HoldReason.KEY_RATE_LIMIT:
        return f"rate limited: {key} of {job_type} {limit}"
    return f"waiting: {used} {job_type} jobs are queued for its executors"


@attrs.frozen(kw_only=True)
class Hold:
    """Due jobs of one scope held back in the leader's last claim, and why."""

    scope: str
    reason: HoldReason
    tenant_id: str
    job_type: str
    key: str | None
    text: str
    #: How many due jobs of this scope the claim saw and held (a lower bound).
    waiting: int

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "reason": self.reason.value,
            "tenantId": self.tenant_id,
            "jobType": self.job_type,
            "text": self.text,
            "waiting": self.waiting,
        }
        if self.key is not None:
            out["key"] = self.key
        return out

    @classmethod
    def from_json(cls, scope: str, data: Mapping[str, Any]) -> Hold:
        return cls(
            scope=scope,
            reason=HoldReason(data["reason"]),
            tenant_id=data["tenantId"],
            job_type=data["jobType"],
            key=data.get("key"),
            text=data["text"],
            waiting=int(data["waiting"]),
        )


@attrs.frozen(kw_only=True)
class FlowReport:
    """What the leader held back in its latest claims (empty: nothing)."""

    at: datetime
    holds: Sequence[Hold] = ()

    def to_json(self) -> dict[str, Any]:
        return {"at": format_time(self.at), "holds": {h.scope: h.to_json() for h in self.holds}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FlowReport:
        """The inverse of :meth:`to_json` (how the stores keep it)."""
        return cls(
            at=parse_time(data["at"], "at"),
            holds=tuple(Hold.from_json(scope, hold) for scope, hold in data["holds"].items()),
        )

    def hold_of(self, *scopes: str) -> Hold | None:
        """The first of ``scopes`` held back, if any."""
        by_scope = {h.scope: h for h in self.holds}
        for scope in scopes:
            if scope in by_scope:
                return by_scope[scope]
        return None

    def busiest(self, tenant_id: str | None, limit: int = 10) -> list[Hold]:
        """The holds with the most waiting jobs (of ``tenant_id``, when given)."""
        mine = [h for h in self.holds if tenant_id is None or h.tenant_id == tenant_id]
        return sorted(mine, key=lambda h: (-h.waiting, h.scope))[:limit]


def busiest_to_json(report: FlowReport | None, tenant_id: str | None, limit: int) -> dict[str, Any]:
    """``GET /flow/held``'s answer (and the Overview's ``held``): the report's time and its
    ``limit`` busiest holds of ``tenant_id`` (every tenant's for None); no holds without a
    report."""
    if report is None:
        return {"holds": []}
    holds = [h.to_json() for h in report.busiest(tenant_id, limit)]
    return {"at": format_time(report.at), "holds": holds}
