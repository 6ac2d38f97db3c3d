"""The fairness phase's options: how many pairs of runs it makes."""

from __future__ import annotations

import argparse

import pytest

from jobscheduler.tools.bench import flow


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    flow.configure(parser)
    return parser


def test_fair_runs_defaults_to_one_pair_and_takes_more() -> None:
    assert parser().parse_args([]).fair_runs == 1
    assert parser().parse_args(["--fair-runs", "3"]).fair_runs == 3


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_fair_runs_refuses_what_is_not_a_count_of_pairs(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--fair-runs", value])
    assert "--fair-runs" in capsys.readouterr().err
