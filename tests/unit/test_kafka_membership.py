"""The Kafka subscription's membership watchdog (``bus/kafka/membership.py``), on a fake
clock: when it asks the coordinator, when it replaces the consumer, when it reports a
problem. Regression (issue 8): a consumer that lost its membership polled on for minutes in
an EMPTY group, and nothing noticed."""

from __future__ import annotations

from jobscheduler.bus.kafka.membership import (
    MIN_RECREATE_INTERVAL,
    ConsumerOptions,
    MembershipWatch,
)

OPTIONS = ConsumerOptions(
    poll_timeout=0.2,
    max_in_flight=8,
    rejoin_timeout=20.0,
    unhealthy_after=60.0,
    membership_check=5.0,
)


def test_a_member_with_steady_evidence_is_never_replaced_nor_asked_about() -> None:
    watch = MembershipWatch(OPTIONS, now=0.0)
    for second in range(1, 300):
        watch.saw_member(float(second))  # e.g. a commit every second
        assert not watch.should_ask(second + 0.5)
        assert watch.replace_due(second + 0.5) is None
        assert watch.absent_for(second + 0.5) is None


def test_without_evidence_the_coordinator_is_asked_once_per_check_interval() -> None:
    watch = MembershipWatch(OPTIONS, now=0.0)
    asked = [t for t in range(0, 30) if watch.should_ask(float(t))]
    assert asked == [5, 10, 15, 20, 25]


def test_an_idle_member_listed_by_the_coordinator_stays_healthy() -> None:
    """More consumers than partitions: no assignment, no commits, but listed."""
    watch = MembershipWatch(OPTIONS, now=0.0)
    for t in range(1, 600):
        if watch.should_ask(float(t)):
            watch.saw_member(float(t))  # the coordinator lists our member id
        assert watch.replace_due(float(t)) is None
        assert watch.absent_for(float(t)) is None


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


def test_doubt_makes_the_next_turn_ask_even_with_recent_evidence() -> None:
    watch = MembershipWatch(OPTIONS, now=0.0)
    watch.saw_member(1.0)
    assert not watch.should_ask(5.0)  # evidence is 4 s old
    watch.doubt(5.5)  # e.g. "partitions lost" or UNKNOWN_MEMBER_ID
    assert watch.should_ask(5.5)
    assert not watch.should_ask(6.0)


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
