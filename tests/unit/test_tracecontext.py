"""The W3C ``traceparent`` a job keeps: what parses, what is ignored."""

from __future__ import annotations

import pytest

from jobscheduler.observability.tracecontext import (
    TraceParent,
    format_traceparent,
    normalize_traceparent,
    parse_traceparent,
)

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_valid_traceparent_parses_into_its_ids_and_flags() -> None:
    parsed = parse_traceparent(VALID)
    assert parsed == TraceParent(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 0x01)
    assert parsed.sampled
    assert parsed.header() == VALID


def test_upper_case_and_surrounding_blanks_are_normalised() -> None:
    assert normalize_traceparent(f"  {VALID.upper()} ") == VALID


def test_a_later_versions_extra_fields_are_ignored() -> None:
    later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra"
    assert normalize_traceparent(later) == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "garbage",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-" + "a" * 600,
    ],
)
def test_an_absent_or_malformed_traceparent_is_ignored(text: str | None) -> None:
    assert parse_traceparent(text) is None
    assert normalize_traceparent(text) is None


def test_format_pads_ids_to_their_width() -> None:
    assert format_traceparent(1, 2, 1) == f"00-{1:032x}-{2:016x}-01"
