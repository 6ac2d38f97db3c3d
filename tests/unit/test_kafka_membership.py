"""The Kafka subscription's membership watchdog (``bus/kafka/membership.py``), on a fake
clock: which statistics reports count as membership, when it replaces the consumer, when it
reports a problem. Regressions: a consumer that lost its membership polled on for
minutes in an EMPTY group, and nothing noticed; then the coordinator probe that noticed it
(``describe_consumer_groups``) aborted the process in librdkafka when the broker was gone,
so membership is now read from the consumer's own statistics."""

from __future__ import annotations

import json
from typing import Any

from jobscheduler.bus.kafka.membership import (
    MIN_RECREATE_INTERVAL,
    ConsumerOptions,
    GroupStats,
    MembershipWatch,
    parse_stats,
)

OPTIONS = ConsumerOptions(
    poll_timeout=0.2, max_in_flight=8, rejoin_timeout=20.0, unhealthy_after=60.0
)


def report(
    state: str = "up",
    join_state: str = "steady",
    rx: int | None = 10,
    size: int = 1,
    partitions: dict[int, tuple[bool, str]] | None = None,
) -> str:
    """A statistics report shaped like librdkafka 2.16's (only the fields read, plus some);
    ``partitions`` maps a partition to (assigned, fetch state)."""
    brokers: dict[str, Any] = {"127.0.0.1:9092/1": {"state": "UP", "rx": 99, "nodeid": 1}}
    if rx is not None:
        brokers["GroupCoordinator"] = {"state": "UP", "rx": rx, "nodeid": -1}
    body = {
        "name": "rdkafka#consumer-1",
        "type": "consumer",
        "brokers": brokers,
        "cgrp": {
            "state": state,
            "stateage": 4000,
            "join_state": join_state,
            "rebalance_age": 0,
            "rebalance_cnt": 0,
            "rebalance_reason": "",
            "assignment_size": size,
        },
        "topics": {
            "it.jobs.dispatch.noop": {
                "topic": "it.jobs.dispatch.noop",
                "partitions": {
                    str(partition): {
                        "partition": partition,
                        "desired": desired,
                        "unknown": False,
                        "fetch_state": fetch_state,
                        "next_offset": 0,
                    }
                    for partition, (desired, fetch_state) in (partitions or {}).items()
                },
            }
        },
    }
    return json.dumps(body)


def stats(state: str = "up", join_state: str = "init", rx: int | None = 10) -> GroupStats:
    return GroupStats(state=state, join_state=join_state, assignment_size=0, coordinator_rx=rx)


def test_parse_stats_reads_the_group_state_and_the_coordinators_responses() -> None:
    assert parse_stats(report(join_state="steady", rx=7, size=2)) == GroupStats(
        state="up", join_state="steady", assignment_size=2, coordinator_rx=7
    )


def test_parse_stats_lists_the_assigned_partitions_whose_fetcher_is_not_running() -> None:
    parsed = parse_stats(
        report(
            size=3,
            partitions={
                -1: (False, "none"),  # librdkafka's internal "unassigned" partition
                0: (True, "active"),
                1: (True, "none"),
                2: (True, "offset-query"),
                3: (False, "stopped"),  # another member's
            },
        )
    )
    assert parsed is not None
    assert parsed.unfetched == frozenset({1, 2})
    assert parse_stats(report()) == GroupStats(
        state="up", join_state="steady", assignment_size=1, coordinator_rx=10
    )


def test_parse_stats_without_a_coordinator_connection_has_no_response_count() -> None:
    parsed = parse_stats(report(state="query-coord", join_state="init", rx=None, size=0))
    assert parsed == GroupStats(
        state="query-coord", join_state="init", assignment_size=0, coordinator_rx=None
    )


def test_parse_stats_of_a_report_without_a_group_or_not_json_is_none() -> None:
    assert parse_stats(json.dumps({"name": "rdkafka#producer-1", "brokers": {}})) is None
    assert parse_stats("{not json") is None
    assert parse_stats(json.dumps([1, 2])) is None


def test_a_member_with_steady_evidence_is_never_replaced() -> None:
    watch = MembershipWatch(OPTIONS, now=0.0)
    for second in range(1, 300):
        watch.saw_member(float(second))  # e.g. a commit every second
        assert watch.replace_due(second + 0.5) is None
        assert watch.absent_for(second + 0.5) is None


def test_an_idle_member_whose_heartbeats_are_answered_stays_healthy() -> None:
    """More consumers than partitions: no assignment, no commits, join_state stays "init"
    under KIP-848, but the coordinator answers its heartbeats (one every 2 s here)."""
    watch = MembershipWatch(OPTIONS, now=0.0)
    rx = 4
    for t in range(1, 600):
        if t % 2 == 0:
            rx += 1
        watch.saw_stats(stats(join_state="init", rx=rx), float(t))
        assert watch.replace_due(float(t)) is None
        assert watch.absent_for(float(t)) is None


def test_a_consumer_that_left_its_group_gets_no_answers_and_is_replaced() -> None:
    """After a LeaveGroup the state stays "up" but heartbeats stop: no evidence."""
    watch = MembershipWatch(OPTIONS, now=0.0)
    assert watch.saw_stats(stats(rx=5), 1.0) is False  # the first report is a baseline
    assert watch.saw_stats(stats(rx=6), 2.0) is True
    for t in range(3, 23):
        assert watch.saw_stats(stats(rx=6), float(t)) is False
    assert watch.replace_due(21.9) is None
    assert watch.replace_due(22.0) == "no sign of group membership for 20s"


def test_responses_while_the_group_is_not_up_are_no_evidence() -> None:
    """Coordinator lost (broker gone): librdkafka looks for a new one."""
    watch = MembershipWatch(OPTIONS, now=0.0)
    watch.saw_stats(stats(state="up", rx=4), 0.5)
    assert watch.saw_stats(stats(state="up", rx=5), 1.0) is True
    for t, rx in ((2.0, 6), (3.0, 7), (4.0, None), (5.0, 8)):
        assert watch.saw_stats(stats(state="wait-coord", rx=rx), t) is False
    assert watch.replace_due(20.9) is None
    assert watch.replace_due(21.0) is not None


def test_a_consumer_stuck_in_a_rebalance_step_is_replaced_though_its_heartbeats_go_on() -> None:
    """Seen after a broker freeze: join_state wait-incr-unassign-to-complete for good, the
    partitions it kept unserved and the one it gave up never released to the other member."""
    watch = MembershipWatch(OPTIONS, now=0.0)
    watch.saw_stats(stats(join_state="steady", rx=4), 0.5)
    assert watch.saw_stats(stats(join_state="steady", rx=5), 1.0) is True
    for t in range(2, 30):
        stuck = stats(join_state="wait-incr-unassign-to-complete", rx=5 + t)
        assert watch.saw_stats(stuck, float(t)) is False
    assert watch.replace_due(20.9) is None
    assert watch.replace_due(21.0) == "no sign of group membership for 20s"


def test_a_replaced_consumer_starts_its_response_count_afresh() -> None:
    """The new consumer's counters start at zero: its first report is a baseline, not a
    decrease, and its second, with answers, is evidence."""
    watch = MembershipWatch(OPTIONS, now=0.0)
    watch.saw_stats(stats(rx=50), 1.0)
    watch.replaced(25.0)
    assert watch.saw_stats(stats(rx=3), 26.0) is False
    assert watch.saw_stats(stats(rx=4), 27.0) is True
    assert watch.replace_due(46.9) is None


def test_a_consumer_out_of_its_group_is_replaced_after_rejoin_timeout_and_again_later() -> None:
    watch = MembershipWatch(OPTIONS, now=0.0)
    watch.saw_member(10.0)
    assert watch.replace_due(29.9) is None
    assert watch.replace_due(30.0) == "no sign of group membership for 20s"
    watch.replaced(30.0)
    # The new consumer gets a full rejoin_timeout to join ...
    assert watch.replace_due(49.9) is None
    assert watch.replace_due(50.0) is not None
    # ... and one that joins is left alone.
    watch.replaced(50.0)
    watch.saw_member(51.0)
    assert watch.replace_due(70.9) is None


def test_replacements_that_bring_no_membership_wait_longer_each_time_until_one_does() -> None:
    # After a broker freeze, a new member needs longer to join a group that is slow to
    # answer; replacing it every rejoin_timeout was a rebalance each time, which held the
    # other members' partitions up too (executors that completed nothing after a thaw).
    watch = MembershipWatch(OPTIONS, now=0.0)
    assert watch.replace_due(20.0) is not None
    watch.replaced(20.0)
    assert watch.rejoin_wait() == 40.0
    assert watch.replace_due(59.9) is None
    assert watch.replace_due(60.0) is not None
    watch.replaced(60.0)
    assert watch.rejoin_wait() == 80.0
    watch.replaced(140.0)
    assert watch.rejoin_wait() == 80.0  # capped at MAX_REJOIN_BACKOFF x rejoin_timeout
    watch.saw_member(141.0)
    assert watch.rejoin_wait() == 20.0
    watch.replaced(200.0)  # its predecessor had been a member: no backoff
    assert watch.rejoin_wait() == 20.0


def test_a_failed_consumer_is_replaced_at_once_but_not_in_a_tight_loop() -> None:
    watch = MembershipWatch(OPTIONS, now=0.0)
    watch.failed("poll failed: Consumer closed")
    assert watch.replace_due(0.5) is None  # just opened: wait MIN_RECREATE_INTERVAL
    assert watch.earliest_replacement() == MIN_RECREATE_INTERVAL
    assert watch.replace_due(1.0) == "poll failed: Consumer closed"
    watch.replaced(1.0)
    assert watch.replace_reason is None
    watch.failed("fatal consumer error")
    assert watch.replace_due(1.5) is None
    assert watch.replace_due(2.0) == "fatal consumer error"


def test_problem_time_runs_on_across_replacements_until_membership_returns() -> None:
    watch = MembershipWatch(OPTIONS, now=0.0)
    for t in (20.0, 40.0):
        watch.replaced(t)  # replacements alone are not membership
    assert watch.absent_for(60.0) is None
    assert watch.absent_for(60.5) == 60.5
    watch.saw_member(61.0)
    assert watch.absent_for(62.0) is None


def test_a_member_holding_a_partition_it_never_fetches_is_replaced() -> None:
    """Seen after a broker freeze: the committed-offset read of a newly assigned partition
    was answered "not coordinator" and never retried; heartbeats went on, the partition's
    wake-ups waited for the reaper."""
    watch = MembershipWatch(OPTIONS, now=0.0)
    rx = 4
    for t in range(1, 20):
        rx += 1
        stuck = GroupStats("up", "steady", 2, rx, unfetched=frozenset({2}))
        assert watch.saw_stats(stuck, float(t)) is (t > 1)  # a member all the same
        assert watch.replace_due(float(t)) is None
    watch.saw_stats(GroupStats("up", "steady", 2, rx + 1, unfetched=frozenset({2})), 21.0)
    assert watch.replace_due(21.0) == "partitions [2] assigned but not fetched for 20s"
    watch.replaced(21.0)
    assert watch.replace_due(40.0) is None  # the new consumer's partitions start afresh


def test_a_partition_whose_fetcher_starts_within_the_wait_is_left_alone() -> None:
    watch = MembershipWatch(OPTIONS, now=0.0)
    watch.saw_stats(GroupStats("up", "steady", 1, 5, unfetched=frozenset({0})), 1.0)
    watch.saw_stats(GroupStats("up", "steady", 1, 6, unfetched=frozenset({0})), 15.0)
    watch.saw_stats(GroupStats("up", "steady", 1, 7), 16.0)  # offset read, fetching
    watch.saw_stats(GroupStats("up", "steady", 1, 8, unfetched=frozenset({1})), 17.0)
    assert watch.replace_due(30.0) is None  # partition 1 waits since 17 s only
    assert watch.replace_due(37.0) is not None
