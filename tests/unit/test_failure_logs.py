"""Every retry and dead-letter line says what failed and when the job runs again: the
error's type and message and ``retry_at`` (``never`` for a dead letter), from the executor
and from the reaper."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from jobscheduler.domain.model import format_time
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.roles.reaper.sweeps import Reaper
from jobscheduler.store import JobStore

from .conftest import DepsFactory, make_job
from .roles_support import abandon_running, queue, raising, registry_with, wake_up


def line(caplog: pytest.LogCaptureFixture, message: str) -> logging.LogRecord:
    [record] = [r for r in caplog.records if r.getMessage() == message]
    return record


async def test_the_executors_retry_and_dead_letter_lines_name_the_error_and_the_next_try(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    deps = make_deps(registry=registry_with(boom=raising(KeyError, "customer 42")))
    job = make_job(job_type="boom", max_attempts=2)
    await queue(deps, store, job)
    executor = Executor(deps)
    with caplog.at_level(logging.INFO):
        assert await executor.run(wake_up(job)) == "retried"
        retried = await store.get(job.id)
        await store.claim_due(retried.scheduled_at, 10)
        assert await executor.run(wake_up(job)) == "dlq"

    retry = line(caplog, "job failed; will retry")
    assert (retry.error_type, retry.error_message) == ("KeyError", "'customer 42'")  # type: ignore[attr-defined]
    assert retry.retry_at == format_time(retried.scheduled_at)  # type: ignore[attr-defined]
    dead = line(caplog, "job dead-lettered")
    assert (dead.error_type, dead.error_message, dead.retry_at) == (  # type: ignore[attr-defined]
        "KeyError",
        "'customer 42'",
        "never",
    )


async def test_the_reapers_recovery_lines_name_the_lost_attempt_and_the_next_try(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    deps = make_deps()
    again, last = make_job(), make_job(attempts=2)  # the second is on its last attempt
    await queue(deps, store, again, last)
    await abandon_running(deps, store, again, last)
    with caplog.at_level(logging.DEBUG, logger="jobscheduler.roles.reaper"):
        await Reaper(deps).sweep()
    lines = {
        r.job_id: r  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "recovered job whose executor stopped heartbeating"
    }
    retried = await store.get(again.id)
    assert lines[again.id].error_type == "Lost"  # type: ignore[attr-defined]
    assert "stopped heartbeating" in lines[again.id].error_message  # type: ignore[attr-defined]
    assert lines[again.id].retry_at == format_time(retried.scheduled_at)  # type: ignore[attr-defined]
    assert lines[last.id].retry_at == "never"  # type: ignore[attr-defined]
