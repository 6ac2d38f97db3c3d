"""The reaper's logs stay readable during an incident: a sweep that recovers many
jobs writes one summary line with counts, and each job only at debug -- before, one WARNING
per job per sweep buried everything else while the scheduler re-dispatched 12,783 times."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from jobscheduler.roles.reaper.sweeps import Reaper
from jobscheduler.store import JobStore

from .conftest import DepsFactory, make_job
from .roles_support import abandon_running, queue

#: The reaper role's loggers (its sweeps and the recovery they share with start-up).
REAPER = "jobscheduler.roles.reaper"


async def test_a_sweep_logs_one_summary_line_and_each_job_at_debug(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    deps = make_deps()
    queued = [make_job() for _ in range(5)]
    running = [make_job(), make_job(attempts=2)]  # the second is on its last attempt
    await queue(deps, store, *queued, *running)
    await abandon_running(deps, store, *running)

    with caplog.at_level(logging.DEBUG, logger=REAPER):
        assert await Reaper(deps).sweep() == {"queued": 5, "claimed": 2}

    reaper_lines = [r for r in caplog.records if r.name.startswith(REAPER)]
    loud = [r for r in reaper_lines if r.levelno >= logging.INFO]
    assert [r.getMessage() for r in loud] == ["reaper recovered jobs"]
    [summary] = loud
    assert summary.levelno == logging.WARNING
    assert (summary.requeued, summary.recovered, summary.dead_lettered) == (5, 2, 1)  # type: ignore[attr-defined]
    per_job = [r for r in reaper_lines if r.levelno == logging.DEBUG]
    assert sorted(r.job_id for r in per_job) == sorted(j.id for j in [*queued, *running])  # type: ignore[attr-defined]


async def test_a_sweep_with_nothing_to_recover_logs_nothing(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger=REAPER):
        assert await Reaper(make_deps()).sweep() == {"queued": 0, "claimed": 0}
    assert [r for r in caplog.records if r.name.startswith(REAPER)] == []
