"""The statuses the dashboard draws, in lifecycle order (the Overview's rows; its charts are
inline SVG drawn by ``static/overview.js`` from ``GET /stats/overview``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: One colour per status (CSS classes ``s-<status>``), in lifecycle order.
STATUS_ORDER: Sequence[str] = (
    "waiting",
    "pending",
    "queued",
    "claimed",
    "running",
    "completed",
    "failed",
    "dlq",
    "cancelled",
    "paused",
)


def statuses_of(counts: Mapping[str, int]) -> list[str]:
    """The rows to draw: every known status in lifecycle order, then any other one counted
    (a status added later still shows up)."""
    return [*STATUS_ORDER, *sorted(set(counts) - set(STATUS_ORDER))]
