"""``jobscheduler loadtest``'s options: bad numbers get argparse's one-line error (exit 2)."""

from __future__ import annotations

import pytest

from jobscheduler.cli.main import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rate", "0"], "argument --rate/-rate: must be greater than zero, got '0'"),
        (["-rate", "inf"], "argument --rate/-rate: must be greater than zero, got 'inf'"),
        (["--rate", "x"], "argument --rate/-rate: not a number: 'x'"),
        (["--concurrency", "1.5"], "argument --concurrency/-concurrency: not an integer: '1.5'"),
        (["--concurrency", "-3"], "must be greater than zero, got '-3'"),
        (["--duration", "0s"], "argument --duration/-duration: must be greater than zero"),
        (["--payload", "[1]"], "argument --payload/-payload: must be a JSON object"),
    ],
)
def test_a_bad_option_is_refused_before_anything_is_sent(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["loadtest", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
