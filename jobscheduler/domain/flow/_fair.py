"""The order of a fair claim: priority first, then weighted round-robin across tenants,
then round-robin across a tenant's fairness keys.

Within one priority level each tenant with due jobs takes ``weight`` jobs per round (default
1), each from its next fairness key in turn (a job's ``fairnessKey``, or its tenant's
default group), each key's jobs oldest first. A tenant's backlog therefore costs another
tenant at most one round per claim, not its whole length; a higher level still goes first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Protocol, TypeVar


class Fair(Protocol):
    """What the order reads of a job."""

    @property
    def id(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def tenant_id(self) -> str: ...
    @property
    def fairness_key(self) -> str: ...
    @property
    def scheduled_at(self) -> object: ...


J = TypeVar("J", bound=Fair)


def fair_order(jobs: Iterable[J], weights: Mapping[str, int], *, turn: int = 0) -> list[J]:
    """``jobs`` in fair claim order. ``turn`` rotates which tenant goes first in a level
    (the caller advances it each claim, so no tenant is always first)."""
    levels: dict[int, dict[str, dict[str, list[J]]]] = {}
    for job in jobs:
        tenants = levels.setdefault(job.priority, {})
        tenants.setdefault(job.tenant_id, {}).setdefault(job.fairness_key, []).append(job)
    ordered: list[J] = []
    for priority in sorted(levels, reverse=True):
        ordered.extend(_level(levels[priority], weights, turn))
    return ordered


def _age(job: Fair) -> tuple[object, str]:
    return (job.scheduled_at, job.id)


def _level(
    tenants: dict[str, dict[str, list[J]]], weights: Mapping[str, int], turn: int
) -> list[J]:
    if len(tenants) == 1:
        [groups] = tenants.values()
        if len(groups) == 1:
            # One tenant, one fairness key (a lone backlog): its jobs, oldest first.
            [lone] = groups.values()
            return sorted(lone, key=_age)
    names = sorted(tenants)
    first = turn % len(names)
    names = names[first:] + names[:first]
    queues: dict[str, deque[deque[J]]] = {}
    for name in names:
        groups = tenants[name]
        queues[name] = deque(deque(sorted(groups[key], key=_age)) for key in sorted(groups))
    out: list[J] = []
    while queues:
        for name in list(queues):
            keys = queues[name]
            for _ in range(max(1, weights.get(name, 1))):
                if not keys:
                    break
                group = keys.popleft()
                out.append(group.popleft())
                if group:
                    keys.append(group)
            if not keys:
                del queues[name]
    return out
