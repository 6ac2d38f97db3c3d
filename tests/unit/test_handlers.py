"""Handler options, JSON Schema validators, the picklable JobContext, and loading the user's
app (``--app`` / ``JOBSCHEDULER_APP``) with its job-type selection."""

from __future__ import annotations

import logging
import pickle
import re
import sys
import textwrap
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from jobscheduler import PermanentError
from jobscheduler.domain import states
from jobscheduler.domain.model import Status
from jobscheduler.domain.validation import parse_create_request
from jobscheduler.errors import AppLoadError, HandlerError, ValidationError
from jobscheduler.handlers import HandlerRegistry, JobContext, default_registry
from jobscheduler.handlers import PermanentError as HandlersPermanentError
from jobscheduler.handlers.loading import describe, load_app, process_problem, resolve_job_types

from .conftest import BASE, make_job


async def async_handler(ctx: JobContext) -> None:
    """A module-level async handler."""


def sync_handler(ctx: JobContext) -> int:
    """A module-level def handler (a worker process can import it)."""
    return 1


def make_ctx() -> JobContext:
    return JobContext(
        job_id="j1",
        tenant_id="t",
        job_type="x",
        payload={},
        attempt=1,
        max_attempts=3,
        logger=logging.LoggerAdapter(logging.getLogger("jobscheduler.handler"), {}),
    )


EMAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "cc": {"type": "array", "items": {"type": "string"}}},
    "required": ["to"],
}


# ------------------------------------------------------------------- options


def test_handler_options_are_kept_with_a_duration_string_or_seconds() -> None:
    registry = HandlerRegistry()
    registry.register("a", async_handler, timeout="30s", max_attempts=5)
    registry.register("b", sync_handler, timeout=1.5)
    a, b = registry.get("a"), registry.get("b")
    assert (a.timeout, a.max_attempts, a.run_in) == (30.0, 5, "trio")
    assert (b.timeout, b.max_attempts, b.run_in) == (1.5, None, "process")
    assert registry.max_attempts_defaults() == {"a": 5}


def test_def_handlers_run_in_a_process_by_default_and_in_a_thread_on_request() -> None:
    registry = HandlerRegistry()
    registry.register("p", sync_handler)
    registry.register("t", sync_handler, run_in="thread")
    assert registry.get("p").run_in == "process"
    assert registry.get("t").run_in == "thread"
    assert not registry.get("t").is_async


def _local_def_handler() -> Callable[[JobContext], None]:
    def local(ctx: JobContext) -> None:
        return None

    return local


@pytest.mark.parametrize(
    ("func", "options", "message"),
    [
        (async_handler, {"timeout": "soon"}, "not a duration"),
        (async_handler, {"timeout": 0}, "positive duration"),
        (async_handler, {"timeout": -1}, "positive duration"),
        (async_handler, {"max_attempts": 0}, "max_attempts"),
        (async_handler, {"max_attempts": 101}, "max_attempts"),
        (async_handler, {"max_attempts": True}, "max_attempts"),
        (async_handler, {"run_in": "process"}, "async def handler runs on trio"),
        (sync_handler, {"run_in": "trio"}, "plain def handler"),
        (sync_handler, {"run_in": "gpu"}, "run_in must be one of"),
        (_local_def_handler(), {}, "define it at module level"),
        (async_handler, {"validate": 42}, "validate must be"),
        (async_handler, {"validate": {"type": "no-such-type"}}, "invalid JSON Schema"),
        (async_handler, {"retention": {"running": "1h"}}, "not a status that is pruned"),
        (async_handler, {"retention": {"completed": "soon"}}, "not a duration"),
        (async_handler, {"retention": {"completed": 0}}, "more than zero"),
        (async_handler, {"retention": ["completed"]}, "must map statuses"),
    ],
)
def test_bad_handler_options_are_refused_at_registration_naming_the_job_type(
    func: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        HandlerRegistry().register("send-email", func, **options)
    assert "send-email" in str(caught.value) or "JSON Schema" in str(caught.value)


def test_decorator_returns_a_handle_that_calls_the_function_and_a_worker_finds_by_name() -> None:
    registry = HandlerRegistry()
    decorated = registry.handler("x", timeout="1s")(sync_handler)
    assert decorated.__wrapped__ is sync_handler
    assert decorated.__name__ == sync_handler.__name__
    assert decorated(make_ctx()) == 1  # still the function when called
    assert registry.get("x").func is decorated
    assert process_problem(registry.get("x")) is None


def test_a_local_def_handler_in_a_thread_is_allowed() -> None:
    registry = HandlerRegistry()
    registry.register("local", _local_def_handler(), run_in="thread")
    assert process_problem(registry.get("local")) is None


def test_permanent_error_is_exported_from_the_package_and_handlers() -> None:
    assert PermanentError is HandlersPermanentError
    assert issubclass(PermanentError, HandlerError)


# ------------------------------------------------------------------- validation


def test_json_schema_validator_reports_the_path_and_message_of_the_error() -> None:
    registry = HandlerRegistry()
    registry.register("send-email", async_handler, validate=EMAIL_SCHEMA)
    validate = registry.validators()["send-email"]
    assert validate is not None
    validate({"to": "a@b.c", "cc": ["x"]})
    with pytest.raises(ValidationError, match=r"^payload\.cc\[1\]: 3 is not of type 'string'$"):
        validate({"to": "a@b.c", "cc": ["x", 3]})
    with pytest.raises(ValidationError, match=r"^payload: 'to' is a required property$"):
        validate({})
    assert registry.get("send-email").options()["validate"] == "json-schema"


def test_create_request_uses_the_types_default_max_attempts_unless_the_job_says() -> None:
    registry = default_registry()
    registry.register("send-email", async_handler, validate=EMAIL_SCHEMA, max_attempts=5)
    body = {
        "idempotencyKey": "k",
        "tenantId": "t",
        "jobType": "send-email",
        "payload": {"to": "a@b.c"},
        "scheduledAt": "2026-01-01T00:00:00Z",
    }

    def create(**fields: Any) -> int:
        job = parse_create_request(
            {**body, **fields},
            now=BASE,
            job_types=registry.validators(),
            max_attempts_defaults=registry.max_attempts_defaults(),
        )
        return job.max_attempts

    assert create() == 5
    assert create(maxAttempts=2) == 2
    assert create(jobType="noop", payload={}) == 3
    with pytest.raises(ValidationError, match="payload: 'to' is a required property"):
        create(payload={})


# ------------------------------------------------------------------- fail(permanent)


def test_a_permanent_failure_dead_letters_with_attempts_left() -> None:
    job = make_job(status=Status.RUNNING, attempts=1, max_attempts=5)  # its first attempt
    change = states.fail(job, token="t", now=BASE, error="PermanentError: 404", permanent=True)
    assert change.set["status"] is Status.DLQ
    assert "attempts" not in change.set  # counted when it started
    assert "scheduled_at" not in change.set
    retry = states.fail(job, token="t", now=BASE, error="boom")
    assert retry.set["status"] is Status.PENDING
    assert retry.set["scheduled_at"] == BASE + timedelta(seconds=2)


# ------------------------------------------------------------------- JobContext


def test_job_context_pickles_with_its_logger_rebuilt_from_names() -> None:
    logger = logging.LoggerAdapter(
        logging.getLogger("jobscheduler.handler"), {"job_id": "j1", "tenant": "t"}
    )
    ctx = JobContext(
        job_id="j1",
        tenant_id="t",
        job_type="x",
        payload={"a": [1, 2]},
        attempt=2,
        max_attempts=3,
        logger=logger,
        deadline=BASE,
    )
    copy = pickle.loads(pickle.dumps(ctx))
    assert copy.logger.logger is logging.getLogger("jobscheduler.handler")
    assert copy.logger.extra == {"job_id": "j1", "tenant": "t"}
    assert (copy.job_id, copy.payload, copy.attempt, copy.deadline) == (
        "j1",
        {"a": [1, 2]},
        2,
        BASE,
    )


# ------------------------------------------------------------------- loading the app


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], str]:
    """Write a module into a fresh current directory; returns its name for ``--app``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    counter = iter(range(1000))

    def write(source: str, name: str = "") -> str:
        module = name or f"userapp_{tmp_path.name.replace('-', '_')}_{next(counter)}"
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
        return module

    return write


USER_APP = """
    from jobscheduler.handlers import HandlerRegistry, JobContext

    registry = HandlerRegistry()
    other = HandlerRegistry()

    @registry.handler("send-email", timeout="30s", max_attempts=5)
    async def send_email(ctx: JobContext) -> None:
        pass

    @other.handler("resize")
    def resize(ctx: JobContext) -> None:
        pass
"""


def test_app_from_the_current_directory_adds_its_handlers_to_the_built_ins(
    app_dir: Callable[..., str],
) -> None:
    module = app_dir(USER_APP)
    registry = load_app(module)
    assert registry.names() == sorted(["send-email", *default_registry().names()])
    assert registry.get("send-email").timeout == 30.0
    assert load_app(f"{module}:other").names() == sorted(["resize", *default_registry().names()])
    assert load_app(None).names() == default_registry().names()


def test_an_app_that_started_from_the_default_registry_does_not_clash_with_itself(
    app_dir: Callable[..., str],
) -> None:
    module = app_dir(
        """
        from jobscheduler.handlers import default_registry
        registry = default_registry()

        @registry.handler("mine")
        async def mine(ctx): pass
        """
    )
    assert "mine" in load_app(module)


@pytest.mark.parametrize(
    ("source", "attribute", "message"),
    [
        (None, "", r"no module named '{module}'"),
        (
            "import no_such_dependency_xyz\n",
            "",
            r"importing '{module}' failed: ModuleNotFoundError",
        ),
        ("raise RuntimeError('boom')\n", "", r"importing '{module}' failed: RuntimeError: boom"),
        ("x = (\n", "", r"importing '{module}' failed: SyntaxError"),
        (USER_APP, ":nothing", r"module '{module}' has no attribute 'nothing'"),
        ("registry = {}\n", "", r"{module}:registry is a dict, not a jobscheduler"),
        (
            "from jobscheduler.handlers import HandlerRegistry\nregistry = HandlerRegistry()\n"
            "@registry.handler('noop')\nasync def noop(ctx): pass\n",
            "",
            r"job type 'noop' of app '{module}' clashes with a built-in handler",
        ),
        (
            "from jobscheduler.handlers import HandlerRegistry\nregistry = HandlerRegistry()\n"
            "registry.register('x', print, timeout='soon')\n",
            "",
            r"importing '{module}' failed: ValueError: x: not a duration",
        ),
    ],
)
def test_app_load_failures_are_one_line_naming_the_module_and_the_cause(
    app_dir: Callable[..., str], source: str | None, attribute: str, message: str
) -> None:
    module = app_dir(source) if source is not None else "no_such_app_module_xyz"
    with pytest.raises(AppLoadError) as caught:
        load_app(module + attribute)
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith("app '") or "clashes" in text
    assert re.search(message.format(module=module), text), text


def test_job_type_selection_takes_one_type_a_comma_list_or_star() -> None:
    registry = default_registry()
    assert resolve_job_types("noop", registry) == ["noop"]
    assert resolve_job_types(" noop , slow,noop", registry) == ["noop", "slow"]
    assert resolve_job_types("*", registry) == registry.names()
    with pytest.raises(AppLoadError, match=r"unknown job type\(s\) 'nope' \(known: flaky, "):
        resolve_job_types("noop,nope", registry)


def test_a_handlers_retention_is_kept_per_status_in_seconds() -> None:
    registry = HandlerRegistry()
    registry.register("ping", async_handler, retention={"completed": "1h", "dlq": "90d"})
    handler = registry.get("ping")
    assert handler.retention == {Status.COMPLETED: 3600.0, Status.DLQ: 90 * 86400.0}
    assert describe(registry) == ["ping  run_in=trio retention=completed:1h,dlq:90d"]


def test_describe_lists_each_type_with_its_options() -> None:
    registry = HandlerRegistry()
    registry.register("send-email", async_handler, timeout="500ms", max_attempts=5)
    registry.register("resize", sync_handler, validate=EMAIL_SCHEMA)
    assert describe(registry) == [
        "resize      run_in=process validate=json-schema",
        "send-email  run_in=trio timeout=500ms max_attempts=5",
    ]
