"""The leader's fair, limited claim (roles/scheduler/flow.py) on the memory store, under
``autojump_clock``: fair shares across tenants, per-key and per-type slots, rates, the room
ahead of the executors, overrides and weights, two leaders at once, and a new leader
starting from the stored state."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from jobscheduler.domain import states
from jobscheduler.domain.flow import LimitOverride, Limits, TenantWeight
from jobscheduler.domain.model import Job, Status
from jobscheduler.roles.scheduler import flow
from jobscheduler.roles.scheduler.flow import REFRESH, FlowClaimer
from jobscheduler.roles.scheduler.loop import Scheduler
from jobscheduler.store import JobStore
from jobscheduler.store.sqlite import SQLiteJobStore

from .conftest import DepsFactory, after, make_job, make_settings, sample
from .flow_support import count_calls, flow_deps, mail, registry


async def finish(store: JobStore, job: Job, now: Any) -> None:
    """Walk a queued job through pick, start and complete (freeing its slots)."""
    picked = await store.apply(states.pick(job.id, worker="w", token="t", now=now))
    assert picked is not None
    running = await store.apply(states.start(job.id, token="t", now=now))
    assert running is not None
    assert await store.apply(states.complete(running, token="t", now=now)) is not None


async def test_a_tenants_backlog_costs_another_tenant_at_most_one_round_of_a_claim(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    deps = flow_deps(make_deps, tmp_path)
    backlog = [make_job(tenant="a", scheduled_at=after(-60 + i)) for i in range(50)]
    late = [make_job(tenant="b", scheduled_at=after(-1)) for _ in range(3)]
    await store.insert_many([*backlog, *late])
    claimed = await FlowClaimer(deps).claim(deps.clock.now(), 10)
    # Round-robin: b's three jobs are among the first six claimed, not after a's fifty.
    assert sorted(i for i, j in enumerate(claimed) if j.tenant_id == "b")[-1] < 6
    assert {j.id for j in late} <= {j.id for j in claimed}


async def test_priority_still_wins_across_levels(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    deps = flow_deps(make_deps, tmp_path)
    await store.insert_many([make_job(tenant="a") for _ in range(5)])
    urgent = await store.insert(make_job(tenant="b", priority=3))
    claimed = await FlowClaimer(deps).claim(deps.clock.now(), 2)
    assert claimed[0].id == urgent.id


async def test_a_weighted_tenant_gets_its_share_of_a_claim(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    deps = flow_deps(make_deps, tmp_path)
    await store.put_tenant_weight(TenantWeight(tenant_id="a", weight=3))
    await store.insert_many([make_job(tenant=t) for t in ("a", "b") for _ in range(10)])
    claimed = await FlowClaimer(deps).claim(deps.clock.now(), 8)
    assert sum(j.tenant_id == "a" for j in claimed) == 6


async def test_a_key_never_has_more_jobs_out_than_its_concurrency(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    deps = flow_deps(make_deps, tmp_path, concurrency=1)
    same = [mail(concurrency_key="customer-42", scheduled_at=after(-10 + i)) for i in range(3)]
    other = mail(concurrency_key="customer-7")
    unkeyed = mail()
    await store.insert_many([*same, other, unkeyed])
    claimer = FlowClaimer(deps)
    first = await claimer.claim(deps.clock.now(), 10)
    assert {j.id for j in first} == {same[0].id, other.id, unkeyed.id}
    assert await claimer.claim(deps.clock.now(), 10) == []
    assert claimer.waiting_for_slots
    report = claimer.report_due(deps.clock.now())
    assert report is not None
    [hold] = report.holds
    assert hold.text == "waiting: customer-42 has 1 of 1 running"
    assert sample(deps.metrics, "scheduler_held_total", {"reason": "concurrency"}) >= 2
    await finish(store, first[0], deps.clock.now())
    [second] = await claimer.claim(deps.clock.now(), 10)
    assert second.id == same[1].id


async def test_a_job_due_while_its_key_is_full_is_reported_held_within_a_refresh(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    deps = flow_deps(make_deps, tmp_path, concurrency=1)
    await store.insert(mail(concurrency_key="customer-42"))
    claimer = FlowClaimer(deps)
    assert len(await claimer.claim(deps.clock.now(), 10)) == 1
    assert claimer.report_due(deps.clock.now()) is None  # nothing held yet
    # Due while the key's one slot is taken: the key is left out of the next reads...
    await store.insert(mail(concurrency_key="customer-42"))
    assert await claimer.claim(deps.clock.now(), 10) == []
    # ...but a refresh reads it, and says why it waits.
    await trio.sleep(REFRESH)
    assert await claimer.claim(deps.clock.now(), 10) == []
    assert claimer.waiting_for_slots
    report = claimer.report_due(deps.clock.now())
    assert report is not None
    [hold] = report.holds
    assert (hold.text, hold.waiting) == ("waiting: customer-42 has 1 of 1 running", 1)


async def test_max_running_bounds_the_type_in_a_tenant_and_a_recovery_frees_a_slot(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    deps = flow_deps(make_deps, tmp_path, max_running=2)
    await store.insert_many([mail(scheduled_at=after(-10 + i)) for i in range(4)])
    await store.insert(mail(tenant="b"))
    claimer = FlowClaimer(deps)
    claimed = await claimer.claim(deps.clock.now(), 10)
    assert sorted(j.tenant_id for j in claimed) == ["a", "a", "b"]
    lost = claimed[0] if claimed[0].tenant_id == "a" else claimed[1]
    await store.apply(states.pick(lost.id, worker="w", token="t", now=deps.clock.now()))
    running = await store.apply(states.start(lost.id, token="t", now=deps.clock.now()))
    assert running is not None
    assert await claimer.claim(deps.clock.now(), 10) == []
    assert await store.apply(states.recover(running, now=deps.clock.now())) is not None
    assert len(await claimer.claim(deps.clock.now(), 10)) == 1


async def test_an_admin_override_wins_over_the_handlers_limit_in_its_tenant_only(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    deps = flow_deps(make_deps, tmp_path, concurrency=1)
    override = LimitOverride(tenant_id="a", job_type="mail", limits=Limits.of(concurrency=3))
    await store.put_limit_override(override)
    await store.insert_many(
        [mail(tenant=t, concurrency_key="k") for t in ("a", "b") for _ in range(4)]
    )
    claimed = await FlowClaimer(deps).claim(deps.clock.now(), 10)
    assert sorted(j.tenant_id for j in claimed) == ["a", "a", "a", "b"]


async def test_two_leaders_claiming_at_once_never_double_a_keys_slot(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    deps = flow_deps(make_deps, tmp_path, concurrency=2)
    await store.insert_many([mail(concurrency_key="k") for _ in range(10)])
    claimed: list[Job] = []

    async def lead() -> None:
        claimed.extend(await FlowClaimer(deps).claim(deps.clock.now(), 10))

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(lead)
    assert len(claimed) == 2
    assert len({j.key_slot for j in claimed}) == 2


async def test_a_rate_limit_spaces_the_starts_and_a_new_leader_starts_from_the_stored_bucket(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    deps = flow_deps(make_deps, tmp_path, rate_limit="10/s", burst=2)
    await store.insert_many([mail() for _ in range(30)])
    first = FlowClaimer(deps)
    assert len(await first.claim(deps.clock.now(), 10)) == 2
    assert await first.claim(deps.clock.now(), 10) == []
    report = first.report_due(deps.clock.now())
    assert report is not None
    assert report.holds[0].text == "rate limited: mail 10/s"
    assert first.wake_at == deps.clock.now() + timedelta(milliseconds=100)
    # A new leader (a fresh claimer) reads the spent bucket rather than a full one.
    assert await FlowClaimer(deps).claim(deps.clock.now(), 10) == []
    await trio.sleep(0.1)
    assert len(await FlowClaimer(deps).claim(deps.clock.now(), 10)) == 1


async def test_the_dispatch_loop_starts_rate_limited_jobs_at_the_rate(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    deps = flow_deps(make_deps, tmp_path, rate_limit="20/s", burst=1)
    await store.insert_many([mail() for _ in range(100)])
    scheduler = Scheduler(deps)
    with trio.move_on_after(2.0):
        await scheduler.dispatch_loop(await deps.elector.campaign())
    count = len(await store.list_jobs("a", Status.QUEUED, 1000))
    assert 40 <= count <= 41


async def test_no_more_jobs_of_a_type_are_queued_than_its_room_ahead(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, claim_ahead=4)
    deps = make_deps(settings=settings)
    await store.insert_many([make_job(tenant="a") for _ in range(10)])
    claimer = FlowClaimer(deps)
    assert len(await claimer.claim(deps.clock.now(), 10)) == 4
    assert await claimer.claim(deps.clock.now(), 10) == []
    report = claimer.report_due(deps.clock.now())
    assert report is not None
    [hold] = report.holds
    assert hold.text == "waiting: 4 noop jobs are queued for its executors"
    assert hold.waiting == 6  # every candidate held, one record


async def test_claims_far_from_the_room_ahead_count_the_queued_jobs_only_near_it(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
    monkeypatch: Any,
) -> None:
    settings = make_settings(tmp_path, claim_ahead=30)
    deps = make_deps(settings=settings)
    await store.insert_many([make_job(tenant="a") for _ in range(50)])
    counted = count_calls(monkeypatch, store, "queued_by_type")
    claimer = FlowClaimer(deps)
    now = deps.clock.now()

    async def claim() -> int:
        return len(await claimer.claim(now, 10))

    # The first claim counts; the next two stay within the room by the bound alone.
    assert [await claim() for _ in range(3)] == [10, 10, 10]
    assert counted.count == 1
    # Near the room, the claim counts again: 30 queued, none taken, so none claimed.
    assert await claim() == 0
    assert counted.count == 2
    # Executors take queued jobs: the next count finds the room they made.
    queued = await store.list_jobs("a", Status.QUEUED, 1000)
    for job in queued[:5]:
        await finish(store, job, now)
    assert await claim() == 5
    assert counted.count == 3
    assert len(await store.list_jobs("a", Status.QUEUED, 1000)) == 30


async def test_a_pass_takes_the_room_the_executors_made_in_one_claim(
    autojump_clock: trio.testing.MockClock,
    make_deps: DepsFactory,
    store: JobStore,
    tmp_path: Path,
    monkeypatch: Any,
) -> None:
    settings = make_settings(tmp_path, claim_ahead=30, claim_batch=5)
    deps = make_deps(settings=settings)
    await store.insert_many([make_job(tenant="a") for _ in range(100)])
    reads = count_calls(monkeypatch, store, "fair_candidates")
    scheduler = Scheduler(deps)
    # A first pass knows no room yet: it claims 5, 10, then the 15 left of 20.
    assert await scheduler.tick() == 30
    assert reads.count == 3
    queued = await store.list_jobs("a", Status.QUEUED, 1000)
    for job in queued[:20]:
        await finish(store, job, deps.clock.now())
    # The next asks for the whole room at once and takes what is free of it.
    reads.count = 0
    assert await scheduler.tick() == 20
    assert reads.count == 1


async def test_a_job_behind_a_full_keys_long_backlog_waits_at_most_for_the_next_full_walk(
    make_deps: DepsFactory,
    sqlite_store: SQLiteJobStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SQLite steps over a full key's due jobs to reach the others; most claims step over
    a few only, and the first after each refresh over all of them."""
    monkeypatch.setattr(flow, "HELD_KEY_WALK", 5)
    settings = make_settings(tmp_path, claim_batch=10)
    deps = make_deps(store=sqlite_store, registry=registry(concurrency=1), settings=settings)
    hot = [mail(concurrency_key="hot", scheduled_at=after(-100 + i)) for i in range(20)]
    await sqlite_store.insert_many(hot)
    claimer = FlowClaimer(deps)
    assert [j.id for j in await claimer.claim(after(0), 10)] == [hot[0].id]
    assert await claimer.claim(after(0), 10) == []  # a full walk: nothing else is due
    cold = mail(concurrency_key="cold", scheduled_at=after(-1))
    await sqlite_store.insert(cold)
    assert await claimer.claim(after(0.5), 10) == []  # behind 19 of the full key's jobs
    assert await claimer.claim(after(REFRESH), 10) == []  # a refresh: the oldest, held
    assert [j.id for j in await claimer.claim(after(REFRESH), 10)] == [cold.id]
