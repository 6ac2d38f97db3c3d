"""Reading metrics from the Prometheus text a metrics listener serves (``/metrics``), with
prometheus_client's own parser.

:func:`metric_value` is the sum of the samples of one name whose labels include the labels
asked for, like PromQL's ``sum(name{labels})``: given every label of the metric that is one
sample; given fewer, it adds up the others (the completions of every job type, say).
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

#: The names of a family's samples by its type: the family's name plus one of these.
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}


def metric_samples(text: str, name: str) -> list[Sample]:
    """Every sample named ``name`` in ``text`` (none for a labelled metric nobody touched
    yet); LookupError when no metric of ``text`` exposes samples of that name."""
    exposed = False
    samples: list[Sample] = []
    for family in text_string_to_metric_families(text):
        suffixes = _SUFFIXES.get(family.type, ("",))
        if any(family.name + suffix == name for suffix in suffixes):
            exposed = True
            samples += [sample for sample in family.samples if sample.name == name]
    if not exposed:
        raise LookupError(f"no metric exposes samples named {name!r}")
    return samples


def metric_value(text: str, name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` (``executor_jobs_processed_total``,
    ``scheduler_tick_duration_seconds_count``, ...) in ``text`` whose labels include every
    one of ``labels``; 0.0 when none does (a labelled metric nobody touched yet).

    A name no metric of ``text`` exposes, or a label that none of its samples carries, is a
    LookupError: a misspelt metric or label must not read as zero.
    """
    samples = metric_samples(text, name)
    carried = {label for sample in samples for label in sample.labels}
    unknown = sorted(set(labels) - carried)
    if samples and unknown:
        raise LookupError(f"{name} has no label {', '.join(unknown)} (its labels: {carried})")
    matching = [s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(matching, 0.0)
