"""Inline SVG charts drawn by the server (no chart library, no script needed to see them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

#: One colour per status; the legend and the table use the same CSS classes.
STATUS_ORDER: Sequence[str] = (
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


def status_bars(counts: Mapping[str, int], *, width: int = 560, bar_height: int = 22) -> str:
    """A horizontal bar chart of job counts by status, as an ``<svg>`` element.

    Every status gets a row (zero included), so the chart keeps its size as counts change
    and a refresh does not shift the layout. Bars are scaled to the largest count.
    """
    label_width, value_width, gap = 90, 80, 6
    rows = [(status, max(0, int(counts.get(status, 0)))) for status in statuses_of(counts)]
    largest = max((count for _, count in rows), default=0) or 1
    track = width - label_width - value_width
    height = len(rows) * (bar_height + gap)
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="jobs by status">'
    ]
    for index, (status, count) in enumerate(rows):
        y = index * (bar_height + gap)
        bar = round(track * count / largest) if count else 0
        name = escape(status)
        parts.append(
            f'<text x="0" y="{y + bar_height - 6}" class="label">{name}</text>'
            f'<rect x="{label_width}" y="{y}" width="{track}" height="{bar_height}" '
            f'class="track"/>'
            f'<rect x="{label_width}" y="{y}" width="{bar}" height="{bar_height}" '
            f'class="bar s-{name}"><title>{name}: {count}</title></rect>'
            f'<text x="{width}" y="{y + bar_height - 6}" class="value" '
            f'text-anchor="end">{count}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
