"""What one scheduler pass does with a due template: which fire times to spawn, how many to
skip, and where the template moves. Pure (no I/O), so every policy is unit-tested directly.

A fire time is *on time* when the scheduler reaches it within :data:`ON_TIME_GRACE`, and
*missed* when it is older (the scheduler was down, or busy). Given the template's current
fire time ``f0 <= now``:

- ``catchUp="one"``: one run, keyed on ``f0``, for all the fire times up to now (the
  behaviour before policies existed); the template moves to the first fire time after now.
- ``catchUp="none"``: missed fire times are skipped; the on-time ones run.
- ``catchUp="all"``: one run per fire time not older than ``catchUpWindow`` (at least the
  grace), oldest first, at most ``cap`` per pass: when more remain, the template moves to
  the first one not yet spawned, so it is still due and the next pass continues there.

Every spawn is keyed on its fire time and the template's move is conditional on ``f0``, so
two schedulers running the same plan at once spawn each fire time once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from ._policy import CatchUp, CronPolicy

ON_TIME_GRACE = timedelta(seconds=60)
#: The most runs one template spawns in one scheduler pass (``catchUp="all"``).
MAX_SPAWNS_PER_PASS = 100
#: Skipped fire times are counted up to this many (they are only logged).
SKIP_COUNT_LIMIT = 100


@attrs.frozen(kw_only=True)
class Plan:
    """``spawn``: fire times to spawn, oldest first. ``skipped``: how many fire times were
    skipped (``skipped_capped``: at least that many; counting stopped). ``next_at``: where
    the template moves (after now, unless a capped catch-up left some due)."""

    spawn: tuple[datetime, ...]
    skipped: int
    skipped_capped: bool
    next_at: datetime
    #: Why fire times were skipped: "missed" (catchUp none) or "outside_catch_up_window".
    skip_reason: str | None


def plan_pass(
    expression: str,
    policy: CronPolicy,
    current: datetime,
    now: datetime,
    *,
    cap: int = MAX_SPAWNS_PER_PASS,
) -> Plan:
    """The plan for a template whose current fire time is ``current`` (``<= now``).

    Raises ValidationError if the expression or zone does not parse.
    """
    if current > now:
        return Plan(spawn=(), skipped=0, skipped_capped=False, next_at=current, skip_reason=None)
    if policy.catch_up is CatchUp.ONE:
        return Plan(
            spawn=(current,),
            skipped=0,
            skipped_capped=False,
            next_at=policy.next_fire(expression, max(now, current)),
            skip_reason=None,
        )
    if policy.catch_up is CatchUp.NONE:
        horizon, reason = ON_TIME_GRACE, "missed"
    else:
        horizon, reason = max(policy.catch_up_window, ON_TIME_GRACE), "outside_catch_up_window"
    earliest = now - horizon

    skipped = 0
    capped = False
    due: list[datetime] = []
    if current >= earliest:
        due.append(current)
    else:
        skipped = 1
        for fire in policy.fires(expression, current):
            if fire.at >= earliest:
                break
            if skipped >= SKIP_COUNT_LIMIT:
                capped = True
                break
            skipped += 1
    if len(due) <= cap:
        start = max(current, earliest - timedelta(microseconds=1))
        for fire in policy.fires(expression, start):
            if fire.at > now or len(due) > cap:
                break
            due.append(fire.at)
    if len(due) > cap:
        next_at = due[cap]
        due = due[:cap]
    else:
        next_at = policy.next_fire(expression, now)
    return Plan(
        spawn=tuple(due),
        skipped=skipped,
        skipped_capped=capped,
        next_at=next_at,
        skip_reason=reason if skipped else None,
    )
