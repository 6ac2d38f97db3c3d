"""How long finished jobs are kept: per status, with overrides per job type and per tenant.

A job in one of :data:`PRUNABLE` is deleted by the reaper once it has been finished for
longer than its retention (with its attempt records; its replays live in the job). The
retention of a job is, for its status, the first of:

1. its tenant's override (set by an admin: ``PUT /retention/{tenant}``,
   ``jobscheduler retention set``);
2. its job type's (the handler's ``retention=`` option, published by the executors);
3. the default (``RETENTION_COMPLETED``, ``RETENTION_CANCELLED``, ``RETENTION_DLQ``).

Cron templates and unfinished jobs are never pruned, and neither is a status not in
:data:`PRUNABLE`. Pure: the store keeps the overrides, the reaper applies them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs

from jobscheduler.domain.durations import parse_duration
from jobscheduler.domain.model import Status, format_time, parse_time

#: The statuses whose jobs are pruned once their retention has passed.
PRUNABLE: tuple[Status, ...] = (Status.COMPLETED, Status.CANCELLED, Status.DLQ)

#: The longest retention (100 years, in seconds): longer is refused, not kept forever.
MAX_KEEP = 100 * 365 * 86400.0

#: Status -> seconds a finished job of that status is kept.
Keep = Mapping[Status, float]


class Scope(enum.StrEnum):
    """What an override applies to."""

    #: Every job of one tenant (an admin's override).
    TENANT = "tenant"
    #: Every job of one job type (its handler's ``retention=`` option).
    JOB_TYPE = "jobType"


def parse_keep(
    value: Mapping[str, str | float | int], *, what: str = "retention"
) -> dict[Status, float]:
    """``{"completed": "1h", "dlq": "90d"}`` -> ``{Status.COMPLETED: 3600.0, ...}``.

    Keys are statuses of :data:`PRUNABLE`; values durations (``500ms`` ... ``7d``) or
    seconds, more than zero and at most :data:`MAX_KEEP`. ValueError names what is wrong."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must map statuses to durations, e.g. {{'completed': '1h'}}")
    keep: dict[Status, float] = {}
    for name, duration in value.items():
        if name not in {s.value for s in PRUNABLE}:
            allowed = ", ".join(s.value for s in PRUNABLE)
            raise ValueError(f"{what}: {name!r} is not a status that is pruned ({allowed})")
        if isinstance(duration, bool) or not isinstance(duration, str | int | float):
            raise ValueError(f"{what}.{name}: must be a duration such as 1h or 7d")
        seconds = parse_duration(duration) if isinstance(duration, str) else float(duration)
        if not 0 < seconds < float("inf"):
            raise ValueError(f"{what}.{name}: must be more than zero, got {duration!r}")
        if seconds > MAX_KEEP:
            raise ValueError(f"{what}.{name}: must be at most 100 years, got {duration!r}")
        keep[Status(name)] = seconds
    return keep


def expired_before(now: datetime, keep: float) -> datetime | None:
    """The finish time before which a job kept ``keep`` seconds has expired at ``now``;
    None when that is before the calendar's first day (nothing is that old)."""
    try:
        return now - timedelta(seconds=keep)
    except OverflowError:
        return None


def format_keep(keep: Keep) -> dict[str, str]:
    """The inverse of :func:`parse_keep`, in whole units where they fit (``7d``, ``90m``)."""
    return {status.value: format_duration(seconds) for status, seconds in sorted(keep.items())}


def format_duration(seconds: float) -> str:
    """``604800`` -> ``7d``, ``5400`` -> ``90m``, ``1.5`` -> ``1500ms``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds * 1000)}ms"


@attrs.frozen(kw_only=True)
class Override:
    """One override as the store keeps it: the retentions it sets (statuses it does not
    name fall through to the next rule)."""

    scope: Scope
    name: str
    keep: Keep
    updated_at: datetime

    def to_json(self) -> dict[str, object]:
        return {
            "scope": self.scope.value,
            "name": self.name,
            "retention": format_keep(self.keep),
            "updatedAt": format_time(self.updated_at),
        }


@attrs.frozen(kw_only=True)
class Rules:
    """The defaults and every override: what the reaper prunes by."""

    defaults: Keep
    by_tenant: Mapping[str, Keep] = attrs.field(factory=dict)
    by_type: Mapping[str, Keep] = attrs.field(factory=dict)

    @classmethod
    def of(cls, defaults: Keep, overrides: Iterable[Override]) -> Rules:
        by_tenant: dict[str, Keep] = {}
        by_type: dict[str, Keep] = {}
        for override in overrides:
            target = by_tenant if override.scope is Scope.TENANT else by_type
            target[override.name] = dict(override.keep)
        return cls(defaults=dict(defaults), by_tenant=by_tenant, by_type=by_type)

    def keep_for(self, tenant_id: str, job_type: str, status: Status) -> float | None:
        """Seconds a ``status`` job of ``tenant_id`` and ``job_type`` is kept after it
        finished; None: never pruned (a status not in :data:`PRUNABLE`)."""
        if status not in PRUNABLE:
            return None
        for rule in (self.by_tenant.get(tenant_id), self.by_type.get(job_type)):
            if rule is not None and status in rule:
                return rule[status]
        return self.defaults.get(status)


@attrs.frozen(kw_only=True)
class PruneSummary:
    """One prune sweep of the reaper, as the Overview shows the last one."""

    at: datetime
    #: Seconds the sweep took.
    took: float
    #: Jobs deleted, per status.
    pruned: Mapping[Status, int]
    #: Of them, written to the archive first.
    archived: int = 0

    @property
    def total(self) -> int:
        return sum(self.pruned.values())

    def to_json(self) -> dict[str, object]:
        return {
            "at": format_time(self.at),
            "took": round(self.took, 3),
            "pruned": {status.value: n for status, n in sorted(self.pruned.items())},
            "archived": self.archived,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PruneSummary:
        return cls(
            at=parse_time(str(data["at"]), "at"),
            took=float(data["took"]),
            pruned={Status(s): int(n) for s, n in dict(data["pruned"]).items()},
            archived=int(data.get("archived", 0)),
        )


__all__ = [
    "MAX_KEEP",
    "PRUNABLE",
    "Keep",
    "Override",
    "PruneSummary",
    "Rules",
    "Scope",
    "expired_before",
    "format_duration",
    "format_keep",
    "parse_keep",
]
