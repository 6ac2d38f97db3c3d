"""Repeated log events become one line per interval with a count (``_logthrottle``)."""

from __future__ import annotations

import logging

import pytest

from jobscheduler.observability.logthrottle import LogThrottle, Throttle, ThrottlingFilter


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def throttled_logger(name: str) -> tuple[FakeClock, LogThrottle]:
    """A fake clock, and a 10 s throttle on that clock over the logger ``name``."""
    clock = FakeClock()
    return clock, LogThrottle(logging.getLogger(name), interval=10.0, clock=clock)


def test_throttle_admits_a_key_once_per_interval_and_counts_the_rest() -> None:
    clock = FakeClock()
    throttle = Throttle(10.0, clock)

    assert throttle.admit("a") == 0
    assert [throttle.admit("a") for _ in range(5)] == [None] * 5
    assert throttle.admit("b") == 0  # keys are independent
    clock.now += 9.99
    assert throttle.admit("a") is None
    clock.now += 0.01
    assert throttle.admit("a") == 6  # six held back since the last line
    assert throttle.admit("a") is None


def test_log_throttle_writes_one_line_per_interval_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, throttled = throttled_logger("test.throttle")

    with caplog.at_level(logging.INFO, logger="test.throttle"):
        for _second in range(25):  # 25 s ...
            for _ in range(19):  # ... of 19 failures a second: 475 events
                throttled.log(logging.ERROR, "store failed", key="pick", extra={"error": "x"})
            clock.now += 1.0

    lines = [r for r in caplog.records if r.name == "test.throttle"]
    assert [r.getMessage() for r in lines] == ["store failed"] * 3  # at 0 s, 10 s and 20 s
    assert [getattr(r, "repeated", 0) for r in lines] == [0, 189, 189]
    assert all(r.levelno == logging.ERROR and r.__dict__["error"] == "x" for r in lines)


def test_recovered_reports_the_held_back_count_once_and_only_after_trouble(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, throttled = throttled_logger("test.throttle.recovered")

    with caplog.at_level(logging.INFO, logger="test.throttle.recovered"):
        assert not throttled.recovered("pick", "store back")  # no trouble: no line
        for _ in range(4):
            throttled.log(logging.ERROR, "store failed", key="pick")
        assert throttled.recovered("pick", "store back")
        assert not throttled.recovered("pick", "store back")
        assert throttled.log(logging.ERROR, "store failed", key="pick")  # a new episode

    messages = [(r.getMessage(), getattr(r, "repeated", None)) for r in caplog.records]
    assert messages == [("store failed", None), ("store back", 3), ("store failed", None)]


def test_filter_passes_one_record_per_interval_per_facility_and_client() -> None:
    clock = FakeClock()
    throttle = ThrottlingFilter(10.0, clock)

    def record(fac: str, client: str, text: str) -> logging.LogRecord:
        return logging.LogRecord(
            "rdkafka", logging.ERROR, __file__, 1, "%s [%s] %s", (fac, client, text), None
        )

    passed = []
    for i in range(30):
        for client in ("consumer-1", "producer-1"):
            rec = record("FAIL", client, f"Connect failed (after {i}ms in state CONNECT)")
            if throttle.filter(rec):
                passed.append(rec.getMessage())
        clock.now += 0.5  # 60 records in 15 s

    assert len(passed) == 4  # each client at 0 s and at 10 s
    assert passed[0] == "FAIL [consumer-1] Connect failed (after 0ms in state CONNECT)"
    assert passed[2] == (
        "FAIL [consumer-1] Connect failed (after 20ms in state CONNECT)"
        " (and 19 more like it since the last line)"
    )
