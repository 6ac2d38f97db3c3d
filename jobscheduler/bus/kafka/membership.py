"""When a subscription's consumer is no longer a working group member: pure decisions.

librdkafka rejoins a group by itself after most faults, but not always (a consumer frozen
past its session was once seen polling for minutes in a group the coordinator listed as
EMPTY). So the subscription keeps the time it last *knew* it was a member and this class
decides, from that and the clock (passed in, so tests need no broker and no sleeping):

- when to replace the consumer: ``rejoin_timeout`` without evidence since the last
  membership or replacement (doubled for each replacement in a row that brought no
  membership, up to ``MAX_REJOIN_BACKOFF`` times), or at once after a fatal error (never
  more often than ``MIN_RECREATE_INTERVAL``);
- when to call the subscription unhealthy: ``unhealthy_after`` without membership;
- when a member is not consuming what it holds: a partition assigned to it whose fetcher has
  not been running (librdkafka's ``fetch_state`` other than ``active``) for as long as it
  may go without membership has the consumer replaced too. Starting a partition's fetcher
  takes milliseconds (its committed offset is read first); seen after a broker freeze, an
  offset read answered "not coordinator" for the whole request left the partition waiting
  for good (librdkafka #5586) while its heartbeats went on, and the wake-ups the scheduler
  sent to it waited for the reaper. A new consumer reads the offset again.

Evidence is local, never a request to the cluster (librdkafka's admin group APIs abort the
process when their requests time out while the broker is gone: librdkafka #4605, #3663):
an assignment, a successful commit, or a statistics report (``statistics.interval.ms``)
that shows the consumer heartbeating in its group -- the group state ``up``, the
coordinator connection having received responses since the previous report, and the join
state not stuck in a rebalance step (``wait-...``). Under the
KIP-848 protocol a member's heartbeat goes to the coordinator every
``group.consumer.heartbeat.interval.ms`` (5 s by default), whether or not it holds
partitions, so a member holding none (more consumers than partitions) counts as a member;
a consumer that left its group, or whose coordinator is unreachable, stops receiving.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

#: Never replace a consumer more often than this (a fault that recurs at once).
MIN_RECREATE_INTERVAL = 1.0
#: Each replacement that brought no membership doubles the wait before the next one, up to
#: this many times ``rejoin_timeout``: a new member needs longer to join a group that is
#: slow to answer (a loaded or just-thawed broker), and every replacement is a rebalance
#: that holds the others' partitions up too.
MAX_REJOIN_BACKOFF = 4

#: How often librdkafka reports statistics to a subscription (``statistics.interval.ms``).
STATS_INTERVAL_MS = 1000


@attrs.frozen(kw_only=True)
class ConsumerOptions:
    """How a subscription polls and watches its membership (seconds)."""

    poll_timeout: float
    max_in_flight: int
    rejoin_timeout: float = 20.0
    unhealthy_after: float = 60.0


@attrs.frozen
class GroupStats:
    """What one librdkafka statistics report says about the consumer's group membership.

    ``state`` is the group handler's state (``up`` once the coordinator is known and
    connected; ``query-coord``, ``wait-coord``... while it is not), ``join_state`` the
    assignment state (``steady`` once an assignment was applied; under KIP-848 a member that
    was never given partitions stays ``init``), ``coordinator_rx`` the responses received
    on the coordinator connection so far (heartbeats, commits), or None without one.
    """

    state: str
    join_state: str
    assignment_size: int
    coordinator_rx: int | None
    #: Partitions assigned to the consumer (``desired``) whose fetcher is not running.
    unfetched: frozenset[int] = frozenset()


def parse_stats(raw: str) -> GroupStats | None:
    """The group part of a statistics report (librdkafka's JSON), or None if it has none."""
    try:
        report: Any = json.loads(raw)
        cgrp = report["cgrp"]
        coordinator = report.get("brokers", {}).get("GroupCoordinator")
        return GroupStats(
            state=str(cgrp["state"]),
            join_state=str(cgrp["join_state"]),
            assignment_size=int(cgrp.get("assignment_size", 0)),
            coordinator_rx=int(coordinator["rx"]) if coordinator else None,
            unfetched=_unfetched(report.get("topics", {})),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _unfetched(topics: dict[str, Any]) -> frozenset[int]:
    return frozenset(
        int(partition["partition"])
        for topic in topics.values()
        for partition in topic.get("partitions", {}).values()
        if partition.get("desired")
        and int(partition["partition"]) >= 0  # -1 is librdkafka's internal "unassigned"
        and partition.get("fetch_state") != "active"
    )


class MembershipWatch:
    """The membership evidence of one subscription and the decisions drawn from it."""

    def __init__(self, options: ConsumerOptions, now: float) -> None:
        self._options = options
        self._member_seen_at = now
        self._replaced_at = now
        #: Replacements in a row since the last evidence of membership.
        self._fruitless = 0
        self._coordinator_rx: int | None = None
        #: The last statistics report, for log lines.
        self.last_stats: GroupStats | None = None
        #: Why the consumer must be replaced as soon as allowed, or None.
        self.replace_reason: str | None = None
        #: Assigned partitions not being fetched, with when they were first seen so.
        self._unfetched_since: dict[int, float] = {}

    def saw_member(self, now: float) -> None:
        """Evidence of membership: an assignment, a commit, a heartbeat answered."""
        self._member_seen_at = now
        self._fruitless = 0

    def saw_stats(self, stats: GroupStats, now: float) -> bool:
        """A statistics report of the current consumer: evidence if the coordinator answered
        it since the previous report while the group state is ``up``. Returns whether it
        was evidence."""
        previous, self._coordinator_rx = self._coordinator_rx, stats.coordinator_rx
        self.last_stats = stats
        self._unfetched_since = {
            partition: self._unfetched_since.get(partition, now) for partition in stats.unfetched
        }
        answered = (
            stats.coordinator_rx is not None
            and previous is not None
            and stats.coordinator_rx > previous
        )
        # A "wait-..." join state is a rebalance step, over within a few seconds; one stuck
        # there (seen: wait-incr-unassign-to-complete after a broker freeze, its partitions
        # held and unserved while its heartbeats went on) is not a working member.
        if stats.state == "up" and answered and not stats.join_state.startswith("wait"):
            self.saw_member(now)
            return True
        return False

    def failed(self, reason: str) -> None:
        """The consumer is unusable (fatal error, a poll that raises): replace it."""
        self.replace_reason = reason

    def replace_due(self, now: float) -> str | None:
        """The reason to replace the consumer now, or None."""
        if now - self._replaced_at < MIN_RECREATE_INTERVAL:
            return None
        if self.replace_reason is not None:
            return self.replace_reason
        absent = now - max(self._member_seen_at, self._replaced_at)
        if absent >= self.rejoin_wait():
            return f"no sign of group membership for {absent:.0f}s"
        if self._unfetched_since:
            since = min(self._unfetched_since.values())
            if now - since >= self.rejoin_wait():
                partitions = sorted(self._unfetched_since)
                return f"partitions {partitions} assigned but not fetched for {now - since:.0f}s"
        return None

    def rejoin_wait(self) -> float:
        """How long the current consumer may go without evidence before it is replaced:
        ``rejoin_timeout``, doubled for each replacement in a row that brought none."""
        factor = min(1 << min(self._fruitless, 8), MAX_REJOIN_BACKOFF)
        return self._options.rejoin_timeout * factor

    def earliest_replacement(self) -> float:
        return self._replaced_at + MIN_RECREATE_INTERVAL

    def replaced(self, now: float) -> None:
        """A new consumer is joining: give it a full ``rejoin_timeout`` (but the time
        without membership, for ``problem``, runs on). Its statistics start afresh."""
        if self._member_seen_at <= self._replaced_at:
            self._fruitless += 1  # the consumer this one replaces never became a member
        self._replaced_at = now
        self._coordinator_rx = None
        self._unfetched_since = {}
        self.replace_reason = None

    def absent_for(self, now: float) -> float | None:
        """How long without membership, if longer than ``unhealthy_after``; else None."""
        absent = now - self._member_seen_at
        return absent if absent > self._options.unhealthy_after else None
