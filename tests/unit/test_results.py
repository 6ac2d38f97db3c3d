"""A handler's return value becomes the job's ``result``; one that cannot be stored (not
JSON, or over 64 KiB) fails the attempt with a clear error."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio

from jobscheduler.domain.attempts import (
    MAX_RESULT_BYTES,
    MAX_TRACEBACK_CHARS,
    Failure,
    Outcome,
    decode_result,
    encode_result,
)
from jobscheduler.domain.model import Status
from jobscheduler.errors import ResultError
from jobscheduler.handlers import JobContext
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.store import JobStore

from .conftest import DepsFactory, make_job
from .roles_support import REAL_BOUND, queue, registry_with, wake_up


@pytest.mark.parametrize("value", [{"a": [1, 2.5, None, True]}, "text", 0, [], {"é": "ü"}, 2**70])
def test_json_results_round_trip(value: Any) -> None:
    text = encode_result(value)
    assert text is not None
    assert decode_result(text) == value


def test_none_is_no_result() -> None:
    assert encode_result(None) is None
    assert decode_result(None) is None


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({1, 2}, "not JSON-serialisable"),
        (object(), "not JSON-serialisable"),
        ({"x": math.nan}, "not JSON-serialisable"),
        ("x" * MAX_RESULT_BYTES, f"more than the {MAX_RESULT_BYTES} allowed"),
    ],
    ids=["set", "object", "nan", "too-big"],
)
def test_unstorable_results_are_refused(value: Any, fragment: str) -> None:
    with pytest.raises(ResultError, match=fragment):
        encode_result(value)


def test_a_result_of_exactly_the_limit_is_accepted() -> None:
    value = "x" * (MAX_RESULT_BYTES - 2)  # plus the two quotes
    text = encode_result(value)
    assert text is not None
    assert len(text.encode()) == MAX_RESULT_BYTES


def test_failure_keeps_the_tail_of_a_long_traceback() -> None:
    try:
        raise LookupError("deep") from ValueError("a long cause " * 1000)
    except LookupError as exc:
        failure = Failure.from_exception(exc)
    assert (failure.type, failure.message, failure.summary()) == (
        "LookupError",
        "deep",
        "LookupError: deep",
    )
    assert failure.traceback is not None
    assert len(failure.traceback) == MAX_TRACEBACK_CHARS
    assert failure.traceback.startswith("…")
    assert failure.traceback.rstrip().endswith("LookupError: deep")


@pytest.mark.parametrize(
    ("returned", "fragment"),
    [({"n": {1}}, "not JSON-serialisable"), ("y" * (MAX_RESULT_BYTES + 1), "bytes of JSON")],
    ids=["not-json", "too-big"],
)
async def test_an_unstorable_result_fails_the_attempt_with_a_clear_error(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    returned: Any,
    fragment: str,
) -> None:
    async def bad_result(ctx: JobContext) -> Any:
        await trio.lowlevel.checkpoint()
        return returned

    deps = make_deps(registry=registry_with(bad_result=bad_result))
    job = make_job(job_type="bad-result")
    await queue(deps, store, job)

    assert await Executor(deps).run(wake_up(job)) == "retried"

    stored = await store.get(job.id)
    assert stored.status is Status.PENDING
    assert stored.result is None
    assert stored.last_error is not None
    assert stored.last_error.startswith("ResultError: handler result ")
    assert fragment in stored.last_error
    [record] = await store.attempts(job.id)
    assert (record.outcome, record.error_type) == (Outcome.FAILED, "ResultError")


def compute(ctx: JobContext) -> dict[str, int]:
    """A plain ``def`` handler: it runs in a worker process, and its result comes back."""
    return {"sum": sum(ctx.payload["numbers"]), "attempt": ctx.attempt}


async def test_a_plain_def_handler_result_is_stored_too(
    make_deps: DepsFactory, store: JobStore
) -> None:
    # Real time: a worker process starts and runs the handler outside trio.
    deps = make_deps(registry=registry_with(compute=compute))
    job = make_job(job_type="compute", payload={"numbers": [1, 2, 3]})
    await queue(deps, store, job)

    with trio.fail_after(REAL_BOUND):
        assert await Executor(deps).run(wake_up(job)) == "completed"
    assert (await store.get(job.id)).result == {"sum": 6, "attempt": 1}
