"""How the roles treat managed jobs: a stale wake-up for a cancelled job is dropped, a paused
template does not fire across its fire time and resumes without a burst, the reaper samples
the job gauges. Virtual time (autojump) with the embedded adapters."""

from __future__ import annotations

import trio
import trio.testing

from jobscheduler.api import actions
from jobscheduler.domain.model import Status
from jobscheduler.roles.executor.consume import Executor
from jobscheduler.roles.reaper.sweeps import sample_gauges
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore
from jobscheduler.store.query import JobQuery

from .conftest import BASE, DepsFactory, make_job, sample
from .roles_support import wake_up


async def test_a_stale_wake_up_for_a_cancelled_job_is_dropped(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    job = await store.insert(make_job())
    [queued] = await store.claim_due(BASE, 10)
    outcome = await actions.cancel(deps, queued)
    assert outcome.job.status is Status.CANCELLED
    assert await Executor(deps).run(wake_up(job)) == "stale"
    assert (await store.get(job.id)).status is Status.CANCELLED


async def test_a_paused_template_does_not_fire_and_resumes_at_its_next_fire_without_a_burst(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    template = await store.insert(make_job(key="hourly", cron="0 * * * *", scheduled_at=BASE))
    await actions.pause(deps, template)
    await trio.sleep(3 * 3600 + 60)  # three fire times pass
    assert await Scheduler(deps).tick() == 0
    runs = JobQuery(tenant_id="tenant-a", template_id=template.id)
    assert await store.find_jobs(runs, 10) == []
    resumed = await actions.resume(deps, await store.get(template.id))
    assert resumed.job.scheduled_at == BASE.replace(hour=4)
    assert await Scheduler(deps).tick() == 0  # nothing missed is made up
    await trio.sleep(3600)
    assert await Scheduler(deps).tick() == 1
    [run] = await store.find_jobs(runs, 10)
    assert run.idempotency_key == f"hourly-run-{int(BASE.replace(hour=4).timestamp())}000000000"


async def test_reaper_samples_job_gauges_and_zeroes_vanished_label_pairs(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore
) -> None:
    deps = make_deps()
    await store.insert(make_job(job_type="email"))
    await store.insert(make_job())
    await trio.sleep(42)
    seen: set[tuple[str, str]] = set()
    assert await sample_gauges(deps, seen)
    assert sample(deps.metrics, "jobs", {"status": "pending", "job_type": "email"}) == 1
    assert sample(deps.metrics, "jobs_queue_lag_seconds") == 42
    [queued, _] = await store.claim_due(deps.clock.now(), 10)
    assert await sample_gauges(deps, seen)
    assert sample(deps.metrics, "jobs", {"status": "queued", "job_type": queued.job_type}) == 1
    assert sample(deps.metrics, "jobs", {"status": "pending", "job_type": queued.job_type}) == 0
    assert sample(deps.metrics, "jobs_queue_lag_seconds") == 0
