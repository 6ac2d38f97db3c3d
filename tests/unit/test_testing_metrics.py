"""jobscheduler.testing's metric reader: the sum of the samples of one name that carry the
labels asked for, and a LookupError for a metric or label the text does not have."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from jobscheduler.testing import metric_samples, metric_value


def exposition() -> str:
    registry = CollectorRegistry()
    processed = Counter(
        "executor_jobs_processed", "jobs", ["job_type", "result"], registry=registry
    )
    processed.labels(job_type="a", result="completed").inc(3)
    processed.labels(job_type="b", result="completed").inc(4)
    processed.labels(job_type="a", result="failed").inc(5)
    Counter("reaper_recovered_jobs", "recovered", ["sweep"], registry=registry)
    Gauge("scheduler_is_leader", "leading", registry=registry).set(1)
    Gauge("scheduler_is_leader_changes", "changes", registry=registry).set(9)
    Histogram("tick_seconds", "tick", registry=registry, buckets=(1.0,)).observe(0.5)
    return generate_latest(registry).decode()


def test_a_metric_sums_the_samples_that_carry_every_label_asked_for() -> None:
    text = exposition()
    assert metric_value(text, "executor_jobs_processed_total", result="completed") == 7.0
    assert metric_value(text, "executor_jobs_processed_total", job_type="a") == 8.0
    assert metric_value(text, "executor_jobs_processed_total", job_type="a", result="failed") == 5
    assert metric_value(text, "executor_jobs_processed_total") == 12.0


def test_a_metric_with_no_matching_sample_reads_zero_and_a_longer_name_does_not_count() -> None:
    text = exposition()
    assert metric_value(text, "executor_jobs_processed_total", result="dlq") == 0.0
    assert metric_value(text, "reaper_recovered_jobs_total", sweep="queued") == 0.0
    assert metric_value(text, "scheduler_is_leader") == 1.0


def test_the_samples_of_a_histogram_are_read_by_their_own_names() -> None:
    text = exposition()
    assert metric_value(text, "tick_seconds_count") == 1.0
    assert metric_value(text, "tick_seconds_sum") == 0.5
    assert [s.labels for s in metric_samples(text, "tick_seconds_bucket")] == [
        {"le": "1.0"},
        {"le": "+Inf"},
    ]


def test_a_misspelt_metric_or_label_is_a_lookup_error_not_zero() -> None:
    text = exposition()
    with pytest.raises(LookupError, match="executor_jobs_processed_count"):
        metric_value(text, "executor_jobs_processed_count")
    with pytest.raises(LookupError, match="no label jobtype"):
        metric_value(text, "executor_jobs_processed_total", jobtype="a")
