"""When the leader stores its report of what is held: at once when a limit of a type starts
or stops holding jobs, once a second while anything is held (which keys, and a type's room
ahead), and once more to clear it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobscheduler.domain.flow import Hold, HoldReason, room_scope
from jobscheduler.observability.metrics import Metrics
from jobscheduler.roles.scheduler.holds import REPORT_EVERY, HeldBook
from jobscheduler.store.query import Exclusions
from tests.support.flow_holds import key_hold

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOTHING = Exclusions()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def room_hold(waiting: int) -> Hold:
    return Hold(
        scope=room_scope("mail"),
        reason=HoldReason.CAPACITY,
        tenant_id="",
        job_type="mail",
        key=None,
        text="waiting: 4 mail jobs are queued for its executors",
        waiting=waiting,
    )


def held(*holds: Hold) -> dict[str, Hold]:
    return {hold.scope: hold for hold in holds}


def test_a_limit_that_starts_or_stops_holding_is_reported_at_once() -> None:
    book = HeldBook(Metrics())
    key = key_hold("a", "customer-42", waiting=2)
    book.update(held(key), NOTHING)
    assert book.report_due(at(0)) is not None
    book.update({}, NOTHING)
    report = book.report_due(at(0.1))
    assert report is not None
    assert report.holds == ()
    assert book.report_due(at(5)) is None  # nothing held, nothing left to clear


def test_the_keys_a_limit_holds_changing_wait_for_the_second() -> None:
    book = HeldBook(Metrics())
    book.update(held(key_hold("a", "customer-1", waiting=1)), NOTHING)
    assert book.report_due(at(0)) is not None
    # Keys finish and others fill with every claim while the limit holds some of them.
    for step in range(1, 9):
        book.update(held(key_hold("a", f"customer-{step}", waiting=1)), NOTHING)
        assert book.report_due(at(step / 10)) is None
    report = book.report_due(at(REPORT_EVERY))
    assert report is not None
    assert [hold.key for hold in report.holds] == ["customer-8"]


def test_a_rooms_hold_coming_and_going_waits_for_the_second_and_is_then_cleared() -> None:
    book = HeldBook(Metrics())
    book.update(held(room_hold(6)), NOTHING)
    first = book.report_due(at(0))
    assert first is not None
    assert [hold.waiting for hold in first.holds] == [6]
    # Under a backlog the room fills and frees with nearly every claim: no write each time.
    for step in range(1, 9):
        book.update(held(room_hold(step)) if step % 2 else {}, NOTHING)
        assert book.report_due(at(step / 10)) is None
    book.update(held(room_hold(3)), NOTHING)
    again = book.report_due(at(REPORT_EVERY))
    assert again is not None
    assert [hold.waiting for hold in again.holds] == [3]
    # Once nothing is held, the next report (within a second) says so, and is the last.
    book.update({}, NOTHING)
    assert book.report_due(at(REPORT_EVERY + 0.5)) is None
    cleared = book.report_due(at(2 * REPORT_EVERY))
    assert cleared is not None
    assert cleared.holds == ()
    assert book.report_due(at(10 * REPORT_EVERY)) is None


def test_a_limit_beside_a_rooms_hold_is_reported_at_once() -> None:
    book = HeldBook(Metrics())
    book.update(held(room_hold(6)), NOTHING)
    assert book.report_due(at(0)) is not None
    book.update(held(room_hold(6), key_hold("a", "customer-42", waiting=1)), NOTHING)
    report = book.report_due(at(0.1))
    assert report is not None
    assert len(report.holds) == 2
