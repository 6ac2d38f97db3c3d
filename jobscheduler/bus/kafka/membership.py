"""When a subscription's consumer is no longer a working group member: pure decisions.

librdkafka rejoins a group by itself after most faults, but not always (a consumer frozen
past its session was once seen polling for minutes in a group the coordinator listed as
EMPTY). So the subscription keeps the time it last *knew* it was a member -- an assignment,
a successful commit, or the coordinator listing its member id -- and this class decides,
from that and the clock (passed in, so tests need no broker and no sleeping):

- when to ask the coordinator (every ``check_interval`` without other evidence, or at once
  when an error casts doubt on the membership);
- when to replace the consumer: ``rejoin_timeout`` without evidence since the last
  membership or replacement, or at once after a fatal error (never more often than
  ``MIN_RECREATE_INTERVAL``);
- when to call the subscription unhealthy: ``unhealthy_after`` without membership.

A member holding no partitions (more consumers than partitions) is still listed by the
coordinator, so it counts as a member.
"""

from __future__ import annotations

import attrs

#: Never replace a consumer more often than this (a fault that recurs at once).
MIN_RECREATE_INTERVAL = 1.0


@attrs.frozen(kw_only=True)
class ConsumerOptions:
    """How a subscription polls and watches its membership (seconds)."""

    poll_timeout: float
    max_in_flight: int
    rejoin_timeout: float = 20.0
    unhealthy_after: float = 60.0
    membership_check: float = 5.0


class MembershipWatch:
    """The membership evidence of one subscription and the decisions drawn from it."""

    def __init__(self, options: ConsumerOptions, now: float) -> None:
        self._options = options
        self._member_seen_at = now
        self._replaced_at = now
        self._next_check = now
        self._doubted = False
        #: Why the consumer must be replaced as soon as allowed, or None.
        self.replace_reason: str | None = None

    def saw_member(self, now: float) -> None:
        """Evidence of membership: an assignment, a commit, the coordinator's list."""
        self._member_seen_at = now

    def doubt(self, now: float) -> None:
        """An error says the membership may be gone: ask the coordinator at the next turn."""
        self._next_check = min(self._next_check, now)
        self._doubted = True

    def failed(self, reason: str) -> None:
        """The consumer is unusable (fatal error, a poll that raises): replace it."""
        self.replace_reason = reason

    def should_ask(self, now: float) -> bool:
        """Whether to ask the coordinator now (and then not again for a check interval)."""
        if now < self._next_check:
            return False
        self._next_check = now + self._options.membership_check
        doubted, self._doubted = self._doubted, False
        return doubted or now - self._member_seen_at >= self._options.membership_check

    def replace_due(self, now: float) -> str | None:
        """The reason to replace the consumer now, or None."""
        if now - self._replaced_at < MIN_RECREATE_INTERVAL:
            return None
        if self.replace_reason is not None:
            return self.replace_reason
        absent = now - max(self._member_seen_at, self._replaced_at)
        if absent >= self._options.rejoin_timeout:
            return f"no sign of group membership for {absent:.0f}s"
        return None

    def earliest_replacement(self) -> float:
        return self._replaced_at + MIN_RECREATE_INTERVAL

    def replaced(self, now: float) -> None:
        """A new consumer is joining: give it a full ``rejoin_timeout`` (but the time
        without membership, for ``problem``, runs on)."""
        self._replaced_at = now
        self._next_check = now
        self.replace_reason = None

    def absent_for(self, now: float) -> float | None:
        """How long without membership, if longer than ``unhealthy_after``; else None."""
        absent = now - self._member_seen_at
        return absent if absent > self._options.unhealthy_after else None
