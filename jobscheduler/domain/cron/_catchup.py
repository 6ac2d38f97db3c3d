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

from collections.abc import Callable, Generator
from datetime import datetime, timedelta

import attrs

from ._fires import DstGap, Fire
from ._ledger import SkipReason
from ._policy import CatchUp, CronPolicy

ON_TIME_GRACE = timedelta(seconds=60)
#: The most runs one template spawns in one scheduler pass (``catchUp="all"``).
MAX_SPAWNS_PER_PASS = 100
#: Skipped fire times are counted (and recorded in the ledger) up to this many per pass.
SKIP_COUNT_LIMIT = 100


@attrs.frozen(kw_only=True)
class Plan:
    """``spawn``: fire times to spawn, oldest first. ``skipped``: how many fire times the
    catch-up policy skipped (``skipped_capped``: at least that many; counting stopped).
    ``next_at``: where the template moves (after now, unless a capped catch-up left some
    due). ``skips``: the ledger's skipped fire times with their reasons, oldest first (at
    most :data:`SKIP_COUNT_LIMIT`): catch-up skips, coalesced fire times and DST-gap skips up
    to ``next_at`` (a gap skip is recorded by the pass that moves the template past it)."""

    spawn: tuple[datetime, ...]
    skipped: int
    skipped_capped: bool
    next_at: datetime
    #: Why fire times were skipped: "missed" (catchUp none) or "outside_catch_up_window".
    skip_reason: str | None
    skips: tuple[tuple[datetime, SkipReason], ...] = ()


def _walk(
    expression: str, policy: CronPolicy, current: datetime, resume: Callable[[], datetime]
) -> Generator[Fire, bool, None]:
    """``current`` (a fire time), then the fire times after it (with DST-gap skips under
    ``dstGap="skip"``). Once the caller sends True the walk jumps: it goes on after
    ``resume()`` instead (skipping the stretch nobody records)."""
    gaps = policy.dst_gap is DstGap.SKIP
    jump = yield Fire(at=current, wall=current.replace(tzinfo=None))
    fires = policy.fires(expression, current, gap_skips=gaps)
    while True:
        if jump:
            fires = policy.fires(expression, resume(), gap_skips=gaps)
        jump = yield next(fires)


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
    one = policy.catch_up is CatchUp.ONE
    if one:
        horizon, reason = timedelta.max, SkipReason.COALESCED
        earliest = current
    elif policy.catch_up is CatchUp.NONE:
        horizon, reason = ON_TIME_GRACE, SkipReason.MISSED
        earliest = now - horizon
    else:
        horizon = max(policy.catch_up_window, ON_TIME_GRACE)
        reason = SkipReason.OUTSIDE_CATCH_UP_WINDOW
        earliest = now - horizon
    # Where a walk that stopped recording skips goes on: for catchUp "one" nothing after the
    # first run is spawned before now; otherwise the first fire time inside the horizon.
    resume_at = now if one else max(current, earliest - timedelta(microseconds=1))

    spawn: list[datetime] = []
    skips: list[tuple[datetime, SkipReason]] = []
    skipped = 0
    capped = False
    walk = _walk(expression, policy, current, lambda: resume_at)
    fire = next(walk)
    while True:
        jump = False
        if fire.skipped:
            if len(skips) < SKIP_COUNT_LIMIT:
                skips.append((fire.at, SkipReason.DST_GAP))
        elif fire.at > now or len(spawn) >= cap:
            next_at = fire.at
            break
        elif (one and spawn) or fire.at < earliest:
            if len(skips) < SKIP_COUNT_LIMIT:
                skips.append((fire.at, reason))
                skipped += 0 if one else 1
            else:
                # Counting stops here; the rest of the stretch is jumped over.
                capped = not one
                jump = True
        else:
            spawn.append(fire.at)
        fire = walk.send(jump)
    return Plan(
        spawn=tuple(spawn),
        skipped=skipped,
        skipped_capped=capped,
        next_at=next_at,
        skip_reason=None if one or not skipped else reason.value,
        skips=tuple(skips),
    )
