"""The Kafka subscription's commit bookkeeping (``bus/kafka/offsets.py``), without a broker.

This is where executors once stalled: a delivery never settled kept its offset "in flight"
forever, so commits froze and flow control paused every partition for good. These
tests pin the rules: only contiguous settled offsets are committed, a release settles like
an ack, a revoke or loss leaves nothing in flight, and flow control always resumes once the
holders settle.
"""

from __future__ import annotations

import random

import pytest

from jobscheduler.bus.kafka.offsets import OffsetBook, PartitionState

T0 = ("jobs.dispatch.noop", 0)
T1 = ("jobs.dispatch.noop", 1)


def book_with(received: dict[tuple[str, int], list[int]], max_in_flight: int = 64) -> OffsetBook:
    book = OffsetBook(max_in_flight)
    book.assign(received)
    for tp, offsets in received.items():
        for offset in offsets:
            assert book.receive(tp, offset) is not None
    return book


def test_out_of_order_settles_commit_only_the_contiguous_prefix() -> None:
    book = book_with({T0: [10, 11, 12, 13]})
    state = book.parts[T0]

    book.settle(T0, state, 12)
    book.settle(T0, state, 11)
    assert book.due_commits() == []  # 10 is still out: nothing may be committed past it

    book.settle(T0, state, 10)
    assert book.due_commits() == [(*T0, 13)]  # 10, 11, 12 done; 13 is next to read
    assert book.due_commits() == []  # nothing moved since

    book.settle(T0, state, 13)
    assert book.due_commits() == [(*T0, 14)]
    assert book.unsettled() == 0


def test_a_settle_repeated_or_for_an_offset_never_received_changes_nothing() -> None:
    book = book_with({T0: [5, 6]})
    state = book.parts[T0]

    book.settle(T0, state, 6)
    book.settle(T0, state, 6)
    book.settle(T0, state, 99)  # never handed out
    assert book.unsettled() == 1
    book.settle(T0, state, 5)
    book.settle(T0, state, 5)
    assert book.unsettled() == 0
    assert book.due_commits() == [(*T0, 7)]


def test_random_settle_orders_never_commit_past_an_unsettled_offset_and_end_empty() -> None:
    rng = random.Random(8)
    for _ in range(200):
        offsets = {T0: list(range(0, 30)), T1: list(range(100, 117))}
        book = book_with(offsets)
        pending = [(tp, o) for tp, offs in offsets.items() for o in offs]
        rng.shuffle(pending)
        settled: set[tuple[tuple[str, int], int]] = set()
        for tp, offset in pending:
            book.settle(tp, book.parts[tp], offset)
            settled.add((tp, offset))
            for topic, partition, position in book.due_commits():
                below = [o for o in offsets[topic, partition] if o < position]
                assert all(((topic, partition), o) in settled for o in below)
        assert book.unsettled() == 0
        assert sorted(book.all_positions()) == [(*T0, 30), (*T1, 117)]


def test_flow_control_pauses_at_the_limit_and_resumes_after_releases() -> None:
    book = book_with({T0: [0, 1], T1: [7]}, max_in_flight=3)
    paused, resumed = book.flow_control()
    assert sorted(paused) == [T0, T1]
    assert resumed == []
    assert book.room() == 0

    # The executor could not learn the outcome: it releases instead of acking.
    book.settle(T0, book.parts[T0], 1)
    paused, resumed = book.flow_control()
    assert paused == []
    # Each resumes at the offset after its last received message (where fetching restarts).
    assert resumed == [(*T0, 2), (*T1, 8)]
    assert book.paused == frozenset()


def test_newly_assigned_partitions_are_resumed_once_in_case_a_pause_was_carried_over() -> None:
    book = OffsetBook(4)
    book.assign([T0])
    assert book.flow_control() == ([], [(*T0, -1)])  # -1: no seek, just resume
    assert book.flow_control() == ([], [])


def test_revoke_commits_settled_positions_and_drops_the_partition_with_its_in_flight() -> None:
    book = book_with({T0: [0, 1, 2], T1: [50]}, max_in_flight=3)
    old = book.parts[T0]
    book.settle(T0, old, 0)
    book.flow_control()  # at the limit: both paused

    assert book.revoke([T0], lost=False) == [(*T0, 1)]
    assert book.unsettled() == 1  # only T1's 50 is still in flight
    assert book.paused == frozenset({T1})
    # A late settle of the revoked generation is ignored, even after a re-assignment.
    book.assign([T0])
    assert not book.settle(T0, old, 1)
    assert not book.is_current(T0, old)
    assert book.parts[T0].unsettled() == 0


def test_loss_drops_state_without_commits_and_nothing_stays_in_flight() -> None:
    book = book_with({T0: [0, 1], T1: [3]}, max_in_flight=3)
    book.settle(T0, book.parts[T0], 0)
    book.flow_control()

    assert book.revoke([T0, T1], lost=True) == []
    assert book.unsettled() == 0
    assert book.room() == 3
    assert book.due_commits() == []
    assert book.flow_control() == ([], [])


def test_losing_everything_for_a_new_consumer_returns_what_was_held() -> None:
    book = book_with({T0: [0], T1: [1]})
    assert sorted(book.lose_all()) == [T0, T1]
    assert book.parts == {}
    assert book.unsettled() == 0


def test_a_message_of_an_unassigned_partition_is_not_tracked() -> None:
    book = OffsetBook(2)
    assert book.receive(T0, 3) is None
    assert book.unsettled() == 0


def test_a_failed_commit_is_sent_again_and_unknown_partitions_are_ignored() -> None:
    book = book_with({T0: [0]})
    book.settle(T0, book.parts[T0], 0)
    assert book.due_commits() == [(*T0, 1)]
    book.commit_failed([T0, ("other", 9)])
    assert book.due_commits() == [(*T0, 1)]


def test_partition_state_counts_what_is_unsettled() -> None:
    state = PartitionState()
    for offset in (4, 5, 6):
        state.receive(offset)
    assert state.unsettled() == 3
    assert not state.mark_done(6)  # the position only moves at the head
    assert state.mark_done(4)
    assert state.position == 5
    assert state.unsettled() == 1
    assert state.next_offset == 7


def test_max_in_flight_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_in_flight"):
        OffsetBook(0)
