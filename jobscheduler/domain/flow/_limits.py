"""What flow control limits: rates as people write them, a job type's limits, and where
each limit's state lives (its scope).

A job type declares its limits as handler options (``concurrency``, ``max_running``,
``rate_limit``, ``key_rate_limit``, ``burst``); an admin overrides them for one tenant
(:class:`LimitOverride`, kept in the store). Every limit is per tenant: tenant A's
``customer-42`` is not tenant B's, and one tenant's jobs of a type never take another's
slots. "Cluster-wide" means across every executor and process, not across tenants.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import attrs

from jobscheduler.errors import ValidationError

_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*(ms|s|m|h)\s*$")
_PER = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
#: Most jobs one rate may allow per second, and most a concurrency limit may hold.
MAX_RATE_PER_SECOND = 100_000
MAX_SLOTS = 10_000
MAX_WEIGHT = 1_000


@attrs.frozen(kw_only=True)
class Rate:
    """``count`` starts per ``per`` seconds (``"100/s"``, ``"10/m"``, ``"5/10s"``)."""

    count: int
    per: float
    text: str

    @classmethod
    def parse(cls, text: str) -> Rate:
        """``<count>/<unit>`` or ``<count>/<n><unit>``; ValidationError otherwise."""
        match = _RATE.match(text) if isinstance(text, str) else None
        if match is None:
            raise ValidationError(f"rate: use e.g. 100/s, 10/m or 5/10s, got {text!r}")
        count, many, unit = int(match.group(1)), match.group(2), match.group(3)
        per = (int(many) if many else 1) * _PER[unit]
        if count < 1 or per <= 0 or count / per > MAX_RATE_PER_SECOND:
            raise ValidationError(
                f"rate: between 1 per period and {MAX_RATE_PER_SECOND}/s, got {text!r}"
            )
        return cls(count=count, per=per, text=f"{count}/{many}{unit}")

    @property
    def interval(self) -> float:
        """Seconds between two starts at this rate."""
        return self.per / self.count

    def default_burst(self) -> int:
        """A tenth of a second's starts, at least 1: enough to absorb a late wake-up of the
        dispatch loop without letting a burst through after a pause (a failover)."""
        return max(1, math.floor(0.1 / self.interval))

    def __str__(self) -> str:
        return self.text


def _positive(name: str, value: Any, top: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
        raise ValidationError(f"{name}: an integer 1..{top}, got {value!r}")
    return value


def _rate(name: str, value: Any) -> Rate | None:
    if value is None or isinstance(value, Rate):
        return value
    try:
        return Rate.parse(value)
    except ValidationError as exc:
        raise ValidationError(f"{name}: {exc}".replace("rate: ", "")) from None


#: The limit fields, in the order they are shown, with their JSON names.
LIMIT_FIELDS: Mapping[str, str] = {
    "concurrency": "concurrency",
    "max_running": "maxRunning",
    "rate_limit": "rateLimit",
    "key_rate_limit": "keyRateLimit",
    "burst": "burst",
}


@attrs.frozen(kw_only=True)
class Limits:
    """A job type's limits in one tenant (None: no such limit).

    - ``concurrency``: at most this many jobs with one ``concurrencyKey`` queued or running
      at once (a job without a key is not limited by it);
    - ``max_running``: at most this many of the type's jobs queued or running at once;
    - ``rate_limit``: the type's starts; ``key_rate_limit``: one key's starts;
    - ``burst``: how many starts a rate lets through at once after a pause (default: a
      tenth of a second's worth, at least 1).
    """

    concurrency: int | None = None
    max_running: int | None = None
    rate_limit: Rate | None = None
    key_rate_limit: Rate | None = None
    burst: int | None = None

    @classmethod
    def of(
        cls,
        *,
        concurrency: int | None = None,
        max_running: int | None = None,
        rate_limit: str | Rate | None = None,
        key_rate_limit: str | Rate | None = None,
        burst: int | None = None,
    ) -> Limits:
        """Checked limits; ValidationError naming the field."""
        return cls(
            concurrency=_positive("concurrency", concurrency, MAX_SLOTS),
            max_running=_positive("maxRunning", max_running, MAX_SLOTS),
            rate_limit=_rate("rateLimit", rate_limit),
            key_rate_limit=_rate("keyRateLimit", key_rate_limit),
            burst=_positive("burst", burst, MAX_SLOTS),
        )

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in LIMIT_FIELDS)

    def over(self, base: Limits) -> Limits:
        """These limits where set, ``base``'s elsewhere (an override over the defaults)."""
        return Limits(
            **{
                name: getattr(base, name) if getattr(self, name) is None else getattr(self, name)
                for name in LIMIT_FIELDS
            }
        )

    def burst_of(self, rate: Rate) -> int:
        return self.burst if self.burst is not None else rate.default_burst()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, key in LIMIT_FIELDS.items():
            value = getattr(self, name)
            if value is not None:
                out[key] = str(value) if isinstance(value, Rate) else value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Limits:
        """The inverse of :meth:`to_json`; ValidationError for a bad value or unknown field."""
        unknown = sorted(set(data) - set(LIMIT_FIELDS.values()))
        if unknown:
            raise ValidationError(f"unknown limit field(s): {', '.join(unknown)}")
        return cls.of(**{name: data.get(key) for name, key in LIMIT_FIELDS.items()})


@attrs.frozen(kw_only=True)
class LimitOverride:
    """An admin's limits for one job type in one tenant, over the handler's."""

    tenant_id: str
    job_type: str
    limits: Limits


@attrs.frozen(kw_only=True)
class TenantWeight:
    """A tenant's share of the claims within a priority level (default 1)."""

    tenant_id: str
    weight: int


def check_weight(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WEIGHT:
        raise ValidationError(f"weight: an integer 1..{MAX_WEIGHT}, got {value!r}")
    return value


# ----------------------------------------------------------------------------- scopes
# A scope names one limit's state: the slots of a key or of a type (``k:``, ``t:``), a
# rate's bucket (``r:``), a type's room ahead of its executors (``c:``). The tenant and the
# job type are in every per-tenant scope, so no two tenants share one; the names are JSON
# lists, so no tenant, type or key text can be read as another's.


def _scope(kind: str, *parts: str) -> str:
    return kind + ":" + json.dumps(list(parts), separators=(",", ":"), ensure_ascii=False)


def type_scope(tenant_id: str, job_type: str) -> str:
    """The ``max_running`` slots of a type in a tenant."""
    return _scope("t", tenant_id, job_type)


def key_scope(tenant_id: str, job_type: str, key: str) -> str:
    """The ``concurrency`` slots of one key of a type in a tenant."""
    return _scope("k", tenant_id, job_type, key)


def rate_scope(tenant_id: str, job_type: str, key: str | None = None) -> str:
    """The rate bucket of a type (``key`` None) or of one key of it, in a tenant."""
    return (
        _scope("r", tenant_id, job_type) if key is None else _scope("r", tenant_id, job_type, key)
    )


@functools.lru_cache(maxsize=4096)
def room_scope(job_type: str) -> str:
    """A type's room ahead of its executors (every tenant's jobs share it). Cached: a
    claim names it for each candidate it holds for room, often hundreds."""
    return _scope("c", job_type)


def scope_parts(scope: str) -> tuple[str, list[str]]:
    """``(kind, [tenant, job type, key...])`` of a scope name."""
    kind, _, rest = scope.partition(":")
    parts = json.loads(rest)
    return kind, [str(part) for part in parts]


def scopes_of(tenant_id: str, job_type: str, key: str | None) -> tuple[str, ...]:
    """Every scope a job of this tenant, type and key can be held back by, the key's first."""
    own = (key_scope(tenant_id, job_type, key), rate_scope(tenant_id, job_type, key)) if key else ()
    return (
        *own,
        type_scope(tenant_id, job_type),
        rate_scope(tenant_id, job_type),
        room_scope(job_type),
    )


def slot_name(scope: str, index: int) -> str:
    """The name of slot ``index`` of ``scope``: what a job holding it stores (unique)."""
    return f"{scope}#{index}"


def slot_scope(slot: str) -> tuple[str, int]:
    """``(scope, index)`` of a slot name."""
    scope, _, index = slot.rpartition("#")
    return scope, int(index)


def free_slot(taken: set[int], slots: int) -> int | None:
    """The lowest free slot index below ``slots``, or None (also when more are taken than
    there are slots: a limit lowered while its jobs ran)."""
    if len(taken) >= slots:
        return None
    return next((i for i in range(slots) if i not in taken), None)
