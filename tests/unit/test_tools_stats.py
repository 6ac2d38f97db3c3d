"""The bench's and the load test's percentiles."""

from __future__ import annotations

import pytest

from jobscheduler.tools.stats import percentile, percentiles


def test_percentile_interpolates_linearly_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == 2.5
    assert percentile(values, 25) == pytest.approx(1.75)
    assert percentile([7.0], 99) == 7.0
    assert percentiles(values, (50, 100)) == {50: 2.5, 100: 4.0}


def test_percentile_rejects_empty_input_and_out_of_range_p() -> None:
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50)
    with pytest.raises(ValueError, match="between 0 and 100"):
        percentile([1.0], 101)
