"""The reaper: recovering stale claimed and running jobs, waking the scheduler, pruning
attempt records (see ``roles_support`` for the clocks).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import trio
import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.attempts import Outcome
from jobscheduler.domain.model import Status
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.roles.reaper.sweeps import Reaper
from jobscheduler.store import JobStore

from .conftest import DepsFactory, after, make_job, make_settings, sample
from .roles_support import ObservedBus, pick_and_start, queue, status_of, wake_up


async def test_reaper_recovers_stale_claimed_and_running_jobs_and_leaves_live_ones(
    autojump_clock: trio.testing.MockClock, observed: tuple[Deps, ObservedBus], store: JobStore
) -> None:
    deps, bus = observed
    running_stale = make_job()
    claimed_stale = make_job()
    last_attempt = make_job(attempts=2, max_attempts=3)
    heartbeating = make_job()
    await queue(deps, store, running_stale, claimed_stale, last_attempt, heartbeating)
    old_run = await pick_and_start(deps, store, running_stale, "tok-a")
    await pick_and_start(deps, store, claimed_stale, "tok-b", start=False)
    await pick_and_start(deps, store, last_attempt, "tok-c")
    await pick_and_start(deps, store, heartbeating, "tok-d")

    await trio.sleep(301)
    now = deps.clock.now()
    assert await store.apply(states.heartbeat(heartbeating.id, token="tok-d", now=now))

    assert await Reaper(deps).sweep() == {"queued": 0, "claimed": 3}

    # A running job's attempt was counted when it started and fails as lost (backoff); a
    # job that never got past claimed goes back at once, uncounted.
    for job, delay, attempts in ((running_stale, 2, 1), (claimed_stale, 0, 0)):
        stored = await store.get(job.id)
        assert stored.status is Status.PENDING
        assert stored.attempts == attempts
        assert stored.claim_token is None
        assert stored.scheduled_at == now + timedelta(seconds=delay)
        assert stored.last_error is not None
        assert stored.last_error.startswith("lost: executor worker-old stopped heartbeating")
        [lost] = await store.attempts(job.id)
        assert (lost.number, lost.outcome, lost.worker) == (1, Outcome.LOST, "worker-old")
        assert lost.error_message == stored.last_error
    dead = await store.get(last_attempt.id)
    assert dead.status is Status.DLQ
    assert dead.attempts == 3
    assert [d.job_id for d in bus.dead_letters] == [last_attempt.id]
    live = await store.get(heartbeating.id)
    assert live.status is Status.RUNNING
    assert live.claim_token == "tok-d"
    assert live.attempts == 1
    assert await store.attempts(heartbeating.id) == []
    assert sample(deps.metrics, "reaper_recovered_jobs_total", {"sweep": "claimed"}) == 3

    # The old executor's late outcome cannot overwrite the recovery.
    assert await store.apply(states.complete(old_run, token="tok-a", now=now)) is None
    # A second sweep finds nothing more to do.
    assert await Reaper(deps).sweep() == {"queued": 0, "claimed": 0}


async def test_reaper_leaves_jobs_alone_until_their_timeouts_pass(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    queued_job, running_job = make_job(), make_job()
    await queue(deps, store, queued_job, running_job)
    await pick_and_start(deps, store, running_job, "tok")
    reaper = Reaper(deps)

    await trio.sleep(29)
    assert await reaper.sweep() == {"queued": 0, "claimed": 0}
    await trio.sleep(2)
    assert await reaper.sweep() == {"queued": 1, "claimed": 0}
    await trio.sleep(300 - 31 - 1)
    assert await reaper.sweep() == {"queued": 0, "claimed": 0}
    assert await status_of(store, running_job) is Status.RUNNING
    await trio.sleep(2)
    assert await reaper.sweep() == {"queued": 0, "claimed": 1}


async def test_reaper_recovery_wakes_the_scheduler(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    assert deps.waker is not None
    await queue(deps, store, make_job())
    await trio.sleep(31)

    assert await Reaper(deps).sweep() == {"queued": 1, "claimed": 0}

    swept_at = deps.clock.now()
    await deps.waker.sleep_until(after(10_000))  # the scheduler's next sleep ends at once
    assert deps.clock.now() == swept_at


async def test_reaper_with_nothing_to_recover_does_not_wake_the_scheduler(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory
) -> None:
    deps = make_deps()
    assert deps.waker is not None
    assert await Reaper(deps).sweep() == {"queued": 0, "claimed": 0}
    await deps.waker.sleep_until(after(100))
    assert deps.clock.now() == after(100)


async def test_reaper_prunes_attempt_records_older_than_the_retention(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
) -> None:
    deps = make_deps(settings=make_settings(tmp_path, attempt_retention=3600.0))
    old, recent = make_job(), make_job()
    await queue(deps, store, old)
    assert await Executor(deps).run(wake_up(old)) == "completed"
    await trio.sleep(1800)
    await queue(deps, store, recent)
    assert await Executor(deps).run(wake_up(recent)) == "completed"

    await trio.sleep(1801)  # old's record is now 3601 s old, recent's 1801 s
    await Reaper(deps).sweep()

    assert await store.attempts(old.id) == []
    assert [a.outcome for a in await store.attempts(recent.id)] == [Outcome.COMPLETED]
    assert (await store.get(old.id)).status is Status.COMPLETED  # the job itself stays
