"""Regression: another job could occupy a cron run's slot, and the template never
fired again. Instance keys were global (``<key>-run-<unixnano>``) and the scheduler took any
duplicate key for "already spawned" without checking whose job held it. Now a run is
identified by (template id, fire time) with its own unique index, keys are unique per tenant,
and the scheduler checks that a duplicate it meets is its own run. On every store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest

from jobscheduler.clock import ManualClock
from jobscheduler.domain import states
from jobscheduler.domain.model import Job
from jobscheduler.errors import DuplicateJob
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore

from .store_support import make_job, scheduler_deps

FIRST = datetime(2026, 9, 29, 18, 0, tzinfo=UTC)
SECOND = FIRST + timedelta(minutes=5)


async def run_after_a_tick(
    store: JobStore, clock: ManualClock, tmp_path: Path, template_id: str, fire_at: datetime
) -> Job:
    """The run of ``template_id``'s fire time ``fire_at`` once a scheduler ticked at
    ``clock``'s time."""
    await Scheduler(scheduler_deps(store, clock, tmp_path, "squat-test")).tick()
    run = await store.find_run(template_id, fire_at)
    assert run is not None
    return run


async def template_of(store: JobStore, tenant: str = "victim") -> tuple[str, str]:
    template = make_job(
        key="nightly", tenant=tenant, cron="*/5 * * * *", scheduled_at=FIRST, created_at=FIRST
    )
    await store.insert(template)
    return template.id, states.instance_key(template, FIRST)


@attrs.frozen
class Squatted:
    """The first run of the victim's template, spawned while ``squatter`` held its key."""

    template_id: str
    run_key: str
    squatter: Job
    clock: ManualClock
    run: Job


async def first_run_beside_a_squatter(store: JobStore, tmp_path: Path, tenant: str) -> Squatted:
    """The victim's template stored, a job of ``tenant`` holding the key of its first run,
    then a scheduler's tick at the first fire time."""
    template_id, run_key = await template_of(store)
    squatter = await store.insert(make_job(key=run_key, tenant=tenant))
    clock = ManualClock(FIRST)
    run = await run_after_a_tick(store, clock, tmp_path, template_id, FIRST)
    return Squatted(template_id, run_key, squatter, clock, run)


async def test_another_tenants_job_with_the_run_key_does_not_stop_the_run(
    store: JobStore, tmp_path: Path
) -> None:
    squatted = await first_run_beside_a_squatter(store, tmp_path, "attacker")
    run, template_id = squatted.run, squatted.template_id
    assert (run.tenant_id, run.template_id, run.fire_at) == ("victim", template_id, FIRST)
    assert run.id != squatted.squatter.id
    assert (await store.get(squatted.squatter.id)).tenant_id == "attacker"


async def test_the_tenants_own_job_holding_the_run_key_gets_the_run_spawned_anyway(
    store: JobStore, tmp_path: Path
) -> None:
    squatted = await first_run_beside_a_squatter(store, tmp_path, "victim")
    run, run_key = squatted.run, squatted.run_key
    assert run.id != squatted.squatter.id
    assert run.idempotency_key.startswith(run_key)
    # The template moved on and its next fire time spawns normally.
    squatted.clock.advance((SECOND - FIRST).total_seconds())
    second = await run_after_a_tick(store, squatted.clock, tmp_path, squatted.template_id, SECOND)
    assert second.idempotency_key == run_key.replace(
        str(int(FIRST.timestamp() * 1e9)), str(int(SECOND.timestamp() * 1e9))
    )


async def test_a_fire_time_spawned_twice_keeps_one_run(store: JobStore, tmp_path: Path) -> None:
    template_id, _ = await template_of(store)
    template = await store.get(template_id)
    first = states.spawn_instance(template, fire_at=FIRST, now=FIRST)
    again = states.spawn_instance(template, fire_at=FIRST, now=FIRST)
    await store.insert(first)
    # A second spawn of one fire time (a repeated pass after a crash, or two leaders for a
    # moment) is a duplicate even under another key: the run's slot is taken.
    with pytest.raises(DuplicateJob):
        await store.insert(again)
    with pytest.raises(DuplicateJob):
        await store.insert(attrs.evolve(again, idempotency_key="some-other-key"))
    assert (await store.find_run(template_id, FIRST)) == first
    assert await store.find_run(template_id, SECOND) is None
