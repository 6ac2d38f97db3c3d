"""The command line with the user's app: ``check``, ``--app`` vs ``JOBSCHEDULER_APP``, and
start-up refusals (one line on stderr, exit 2, no traceback): an app that does not load, a
port that is taken."""

from __future__ import annotations

import gc
import logging
import re
import socket
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jobscheduler.cli import main as cli_main
from jobscheduler.cli.main import main
from jobscheduler.config import ENVIRONMENT_VARIABLES
from jobscheduler.handlers import default_registry

GOOD_APP = """
    from jobscheduler.handlers import HandlerRegistry

    registry = HandlerRegistry()

    @registry.handler("send-email", timeout="30s", max_attempts=5,
                      validate={"type": "object", "required": ["to"]})
    async def send_email(ctx):
        pass

    @registry.handler("resize")
    def resize(ctx):
        return None
"""

# A def handler hidden behind a wrapper: a worker process could not import it by name.
UNPICKLABLE_APP = """
    from jobscheduler.handlers import HandlerRegistry

    registry = HandlerRegistry()

    def _wrap(func):
        def wrapper(ctx):
            return func(ctx)
        wrapper.__qualname__ = "wrapper"
        return wrapper

    registry.register("wrapped", _wrap(print))
"""


@pytest.fixture
def write_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], str]:
    """A clean environment, the current directory a fresh one; writes a module there."""
    for name in ENVIRONMENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    counter = iter(range(100))

    def write(source: str) -> str:
        module = f"cliapp_{tmp_path.name.replace('-', '_')}_{next(counter)}"
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
        return module

    return write


@pytest.fixture
def good_app(write_app: Callable[[str], str]) -> str:
    """The module name of :data:`GOOD_APP`, written in the fresh directory."""
    return write_app(GOOD_APP)


def test_check_lists_every_job_type_with_its_options_and_exits_0(
    good_app: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--app", good_app]) == 0
    out = capsys.readouterr().out
    assert f"app {good_app}" in out
    assert re.search(
        r"^  send-email +run_in=trio timeout=30s max_attempts=5 validate=json-schema$", out, re.M
    )
    assert re.search(r"^  resize +run_in=process$", out, re.M)
    assert "noop" in out
    assert "(built-in)" in out
    assert f"ok: {len(default_registry().names()) + 2} job types" in out


def test_check_exits_1_when_a_process_handler_cannot_be_imported_by_a_worker(
    write_app: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    module = write_app(UNPICKLABLE_APP)
    assert main(["check", "--app", module]) == 1
    captured = capsys.readouterr()
    assert "wrapped" in captured.out
    assert "PROBLEM: a worker process cannot import the function" in captured.out
    assert "1 problem(s)" in captured.err


def test_check_exits_1_when_job_type_names_an_unknown_type(
    good_app: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOB_TYPE", "send-email,send-sms")
    assert main(["check", "--app", good_app]) == 1
    assert "unknown job type(s) 'send-sms'" in capsys.readouterr().out


def test_the_app_flag_wins_over_the_environment(
    good_app: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBSCHEDULER_APP", "no_such_module_for_cli")
    assert main(["check", "--app", good_app]) == 0
    with pytest.raises(SystemExit) as caught:
        main(["check"])
    assert caught.value.code == 2
    assert "no module named 'no_such_module_for_cli'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["dev", "--app", "{module}:nothing"],
        ["run-api", "--app", "{module}:nothing"],
        ["run-executor", "--app", "{module}:nothing"],
        ["check", "--app", "{module}:nothing"],
    ],
)
def test_an_app_that_does_not_load_stops_start_up_with_one_line_and_exit_2(
    good_app: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    monkeypatch.setenv("JOB_TYPE", "*")
    with pytest.raises(SystemExit) as caught:
        main([arg.format(module=good_app) for arg in argv])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        f"jobscheduler: app '{good_app}:nothing': module '{good_app}' has no attribute 'nothing'; "
        f"its HandlerRegistry is 'registry': use {good_app}:registry\n"
    )


@pytest.mark.parametrize(
    ("source", "hint"),
    [
        ("jobs = HandlerRegistry()", "its HandlerRegistry is 'jobs': use {module}:jobs"),
        (
            "emails = HandlerRegistry()\nreports = HandlerRegistry()",
            "it has several HandlerRegistry objects: use {module}:emails or {module}:reports",
        ),
        (
            "handlers = {}",
            "it has no HandlerRegistry: define registry = HandlerRegistry() in it, or name "
            "yours as MODULE:ATTR ({module}:<name>)",
        ),
    ],
)
def test_an_app_without_a_registry_attribute_suggests_module_colon_attr(
    write_app: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
    source: str,
    hint: str,
) -> None:
    module = write_app("from jobscheduler.handlers import HandlerRegistry\n" + source)
    with pytest.raises(SystemExit) as caught:
        main(["dev", "--app", module])
    assert caught.value.code == 2
    assert capsys.readouterr().err == (
        f"jobscheduler: app '{module}': module '{module}' has no attribute 'registry' "
        f"(the default); {hint.format(module=module)}\n"
    )


def test_run_executor_refuses_an_unknown_job_type_listing_the_known_ones(
    good_app: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOB_TYPE", "resize,send-fax")
    assert main(["run-executor", "--app", good_app]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    known = ", ".join(sorted([*default_registry().names(), "resize", "send-email"]))
    assert f"JOB_TYPE: unknown job type(s) 'send-fax' (known: {known})" in err


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port some other process listens on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


def busy_line(port: int, variable: str) -> str:
    return (
        f"jobscheduler: cannot listen on 127.0.0.1:{port}: the port is already in use "
        f"(another jobscheduler?); set {variable} to change it\n"
    )


@pytest.mark.parametrize(
    ("variable", "other"), [("API_PORT", "METRICS_PORT"), ("METRICS_PORT", "API_PORT")]
)
def test_a_busy_port_stops_dev_with_one_line_naming_it_and_its_variable_and_exit_2(
    write_app: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    busy_port: int,
    variable: str,
    other: str,
) -> None:
    monkeypatch.setenv(variable, str(busy_port))
    monkeypatch.setenv(other, "0")
    assert main(["dev"]) == 2
    assert capsys.readouterr().err == busy_line(busy_port, variable)


def test_a_port_taken_after_the_start_up_check_ends_dev_with_the_same_line_and_exit_2(
    write_app: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    busy_port: int,
) -> None:
    # dev routes the root logger to this test's stderr: give it back afterwards.
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    # The roles start, then the API cannot bind: not trio's nested exception groups.
    monkeypatch.setattr(cli_main, "check_listeners", lambda settings, *, api: None)
    monkeypatch.setenv("API_PORT", str(busy_port))
    monkeypatch.setenv("METRICS_PORT", "0")
    assert main(["dev"]) == 2
    # hypercorn leaves the socket whose bind failed to the garbage collector: collect it
    # here, where its ResourceWarning is expected.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    err = capsys.readouterr().err
    assert err.endswith(busy_line(busy_port, "API_PORT"))
    assert "Traceback" not in err
    assert "ExceptionGroup" not in err
