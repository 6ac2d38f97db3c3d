"""The pure part of flow control: rates, limits, the GCRA bucket and the fair order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobscheduler.domain.flow import (
    FlowReport,
    Hold,
    HoldReason,
    Limits,
    Rate,
    allowance,
    fair_order,
    hold_text,
    next_start,
    refund,
    slot_name,
    slot_scope,
    spend,
)
from jobscheduler.errors import ValidationError
from jobscheduler.testing import JobFactory

NOW = datetime(2026, 9, 29, 18, 0, tzinfo=UTC)
make_job = JobFactory(at=NOW)


@pytest.mark.parametrize(
    ("text", "count", "per"),
    [("100/s", 100, 1.0), ("10/m", 10, 60.0), ("5/10s", 5, 10.0), (" 3 / h ", 3, 3600.0)],
)
def test_a_rate_reads_count_per_period(text: str, count: int, per: float) -> None:
    rate = Rate.parse(text)
    assert (rate.count, rate.per) == (count, per)


@pytest.mark.parametrize("text", ["", "100", "0/s", "10/d", "x/s", "1000000/s"])
def test_a_malformed_or_out_of_range_rate_is_refused(text: str) -> None:
    with pytest.raises(ValidationError):
        Rate.parse(text)


def test_the_default_burst_is_a_tenth_of_a_second_of_starts_at_least_one() -> None:
    assert Rate.parse("50/s").default_burst() == 5
    assert Rate.parse("10/m").default_burst() == 1


def test_an_override_wins_where_it_is_set() -> None:
    base = Limits.of(concurrency=1, rate_limit="10/s")
    merged = Limits.of(concurrency=3).over(base)
    assert (merged.concurrency, str(merged.rate_limit)) == (3, "10/s")


def test_limits_round_trip_through_json_and_refuse_unknown_fields() -> None:
    limits = Limits.of(max_running=4, key_rate_limit="10/m", burst=2)
    assert Limits.from_json(limits.to_json()) == limits
    with pytest.raises(ValidationError, match="unknown"):
        Limits.from_json({"concurency": 1})
    with pytest.raises(ValidationError, match="concurrency"):
        Limits.of(concurrency=0)


def test_a_full_bucket_allows_its_burst_then_one_start_per_interval() -> None:
    rate = Rate.parse("10/s")
    assert allowance(rate, 3, None, NOW) == 3
    tat = spend(rate, None, NOW, 3)
    assert tat == NOW + timedelta(milliseconds=300)
    assert allowance(rate, 3, tat, NOW) == 0
    assert allowance(rate, 3, tat, NOW + timedelta(milliseconds=100)) == 1
    assert next_start(rate, 3, tat) == NOW + timedelta(milliseconds=100)


def test_a_refund_gives_back_the_starts_spent_but_not_used() -> None:
    rate = Rate.parse("10/s")
    tat = spend(rate, NOW, NOW, 5)
    assert refund(rate, tat, 2) == NOW + timedelta(milliseconds=300)


def test_starts_over_time_never_exceed_the_rate_plus_the_burst() -> None:
    rate, burst = Rate.parse("50/s"), 5
    tat, started = None, 0
    for tick in range(1000):  # 1 s of passes every millisecond
        now = NOW + timedelta(milliseconds=tick)
        n = allowance(rate, burst, tat, now)
        if n:
            tat, started = spend(rate, tat, now, n), started + n
    assert 50 <= started <= 50 + burst


def test_the_fair_order_alternates_tenants_within_a_level_and_keeps_priority_first() -> None:
    backlog = [make_job(tenant="a", scheduled_at=NOW - timedelta(seconds=10 - i)) for i in range(4)]
    late = [make_job(tenant="b") for _ in range(2)]
    urgent = make_job(tenant="c", priority=9)
    order = fair_order([*backlog, *late, urgent], {})
    assert [j.tenant_id for j in order] == ["c", "a", "b", "a", "b", "a", "a"]
    assert [j.id for j in order if j.tenant_id == "a"] == [j.id for j in backlog]


def test_a_tenant_with_weight_two_takes_two_claims_per_round() -> None:
    jobs = [make_job(tenant="a") for _ in range(4)] + [make_job(tenant="b") for _ in range(4)]
    order = fair_order(jobs, {"a": 2})
    assert [j.tenant_id for j in order][:6] == ["a", "a", "b", "a", "a", "b"]


def test_a_tenants_fairness_keys_take_turns_within_its_share() -> None:
    jobs = [make_job(tenant="a", fairness_key="bulk") for _ in range(3)]
    jobs += [make_job(tenant="a", fairness_key="live")]
    jobs += [make_job(tenant="b") for _ in range(3)]
    order = fair_order(jobs, {})
    assert [(j.tenant_id, j.fairness_key) for j in order][:4] == [
        ("a", "bulk"),
        ("b", ""),
        ("a", "live"),
        ("b", ""),
    ]


def test_a_lone_tenants_one_group_comes_oldest_first_however_it_was_read() -> None:
    ages = [3, 1, 4, 1, 5, 9, 2, 6]
    jobs = [make_job(tenant="a", scheduled_at=NOW - timedelta(seconds=s)) for s in ages]
    expected = sorted(jobs, key=lambda j: (j.scheduled_at, j.id))
    assert fair_order(jobs, {"a": 3}, turn=5) == expected
    # The same jobs beside another level's keep that order within their level.
    urgent = make_job(tenant="b", priority=1)
    assert fair_order([*jobs, urgent], {}) == [urgent, *expected]


def test_the_turn_rotates_which_tenant_goes_first() -> None:
    jobs = [make_job(tenant="a"), make_job(tenant="b")]
    assert [j.tenant_id for j in fair_order(jobs, {}, turn=1)] == ["b", "a"]


def test_slot_names_carry_their_scope() -> None:
    assert slot_scope(slot_name("k:t/mail/customer#42", 3)) == ("k:t/mail/customer#42", 3)


def test_held_jobs_are_described_in_words() -> None:
    text = hold_text(HoldReason.CONCURRENCY, job_type="mail", key="customer-42", used=1, limit=1)
    assert text == "waiting: customer-42 has 1 of 1 running"
    rate = hold_text(HoldReason.RATE_LIMIT, job_type="send-email", key=None, limit="100/s")
    assert rate == "rate limited: send-email 100/s"


def test_the_report_names_the_busiest_scopes_first() -> None:
    def hold(scope: str, waiting: int, tenant: str = "a") -> Hold:
        return Hold(
            scope=scope,
            reason=HoldReason.CONCURRENCY,
            tenant_id=tenant,
            job_type="mail",
            key=scope,
            text="",
            waiting=waiting,
        )

    report = FlowReport(at=NOW, holds=(hold("x", 1), hold("y", 9), hold("z", 5, "b")))
    assert [h.scope for h in report.busiest(None)] == ["y", "z", "x"]
    assert [h.scope for h in report.busiest("a", 1)] == ["y"]
    assert report.hold_of("nope", "x") == report.holds[0]
