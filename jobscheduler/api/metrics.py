"""The API's request metrics: ``api_requests_total`` and ``api_request_duration_seconds``,
counted by the app's ``after_request`` hook and by the create's fast path alike."""

from __future__ import annotations

from typing import Any

from jobscheduler.observability.metrics import Metrics


class RequestMetrics:
    """Counts requests by method, route and status, and times them by method and route.

    Label children are cached per (method, route, status): resolving labels on every request
    costs more than the counting itself.
    """

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._counters: dict[tuple[str, str, int], Any] = {}
        self._histograms: dict[tuple[str, str], Any] = {}

    def observe(self, method: str, route: str, status: int, seconds: float | None) -> None:
        """One request answered; ``seconds`` None when it was not timed."""
        counter = self._counters.get((method, route, status))
        if counter is None:
            counter = self._metrics.api_requests.labels(
                method=method, route=route, status=str(status)
            )
            self._counters[(method, route, status)] = counter
        counter.inc()
        if seconds is None:
            return
        histogram = self._histograms.get((method, route))
        if histogram is None:
            histogram = self._metrics.api_request_duration.labels(method=method, route=route)
            self._histograms[(method, route)] = histogram
        histogram.observe(seconds)
