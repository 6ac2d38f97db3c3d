"""The argparse types the command line and the tools share: each refusal is the one line
argparse prints beside the flag."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import pytest

from jobscheduler._argtypes import integer, json_object, json_value, positive_int
from jobscheduler.cli.seed import _non_negative_int
from jobscheduler.cli.workflows import _steps


@pytest.mark.parametrize(
    ("parse", "text", "refusal"),
    [
        (json_value, "{", "^not JSON: Expecting property name"),
        (json_object, "[1]", "^must be a JSON object$"),
        (_steps, "3", r"^a JSON list of steps \(objects\)"),
        (integer, "1.5", "^not an integer: '1.5'$"),
        (positive_int, "0", "^must be at least 1$"),
        (_non_negative_int, "-1", "^must be zero or more, got -1$"),
    ],
)
def test_a_bad_argument_is_refused_in_one_line(
    parse: Callable[[str], Any], text: str, refusal: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=refusal):
        parse(text)


def test_good_arguments_are_read() -> None:
    assert json_object('{"a": [1]}') == {"a": [1]}
    assert _steps('{"steps": [{"name": "a"}]}') == [{"name": "a"}]
    assert (integer("-3"), positive_int("1"), _non_negative_int("0")) == (-3, 1, 0)
