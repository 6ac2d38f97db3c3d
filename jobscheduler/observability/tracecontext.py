"""W3C Trace Context: the ``traceparent`` a client sends and a job keeps.

``traceparent`` is ``<version>-<trace id>-<parent span id>-<flags>``: two hex digits, 32,
16, then two, e.g. ``00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01``. A job stores
the one its create belonged to (:attr:`~jobscheduler.domain.model.Job.trace_parent`) so the
spans of its claim and its attempts join that trace, whichever process makes them. A header
that does not parse is ignored, as the W3C recommendation says (a request is never refused
for it). Pure: no tracing library is needed to read or keep one.
"""

from __future__ import annotations

import re

import attrs

#: The HTTP header (lower case, as ASGI gives header names).
HEADER = "traceparent"

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


@attrs.frozen
class TraceParent:
    """A parsed ``traceparent``: the trace, the parent span in it, and the sampled flag."""

    trace_id: int
    span_id: int
    flags: int

    @property
    def sampled(self) -> bool:
        return bool(self.flags & 1)

    def header(self) -> str:
        """The ``traceparent`` value (version 00)."""
        return format_traceparent(self.trace_id, self.span_id, self.flags)


def format_traceparent(trace_id: int, span_id: int, flags: int) -> str:
    """``00-<trace id>-<span id>-<flags>`` in lower-case hex."""
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def parse_traceparent(text: str | None) -> TraceParent | None:
    """The trace context ``text`` names, or None when it is absent or malformed: not the
    grammar above, version ``ff``, an all-zero trace or span id, or a version-00 value with
    anything after the flags. A later version's extra fields are ignored, as the spec asks."""
    if not text or len(text) > 512:
        return None
    match = _TRACEPARENT.fullmatch(text.strip().lower())
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    if version == "00" and rest:
        return None
    return TraceParent(int(trace_id, 16), int(span_id, 16), int(flags, 16))


def normalize_traceparent(text: str | None) -> str | None:
    """``text`` as a job keeps it (version 00, lower case), or None if it does not parse."""
    parsed = parse_traceparent(text)
    return None if parsed is None else parsed.header()
