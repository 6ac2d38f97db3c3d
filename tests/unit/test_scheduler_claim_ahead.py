"""Claims ahead (``RATE_AHEAD``) of a rate-limited type, on the memory store under
``autojump_clock``: each job claimed for its own start instant on the rate's schedule and sent
naming it, the room ahead left to jobs that start now, and what a leader that dies, or another
that spends the rate meanwhile, leaves behind."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from jobscheduler.domain.model import Job, Status
from jobscheduler.roles.deps import Deps
from jobscheduler.roles.scheduler.flow import FlowClaimer
from jobscheduler.roles.scheduler.loop import CLAIM_LEAD, Scheduler
from jobscheduler.store import JobStore

from .conftest import DepsFactory, make_job, make_settings
from .flow_support import mail, registry
from .roles_support import ObservedBus


@pytest.fixture
async def deps(make_deps: DepsFactory, tmp_path: Path, store: JobStore) -> Deps:
    """Deps whose ``mail`` type starts 10 a second, claimed up to a second ahead
    (``RATE_AHEAD``), with 30 due ``mail`` jobs stored."""
    settings = make_settings(tmp_path, claim_batch=50, rate_ahead=1.0)
    deps = make_deps(registry=registry(rate_limit="10/s", burst=1), settings=settings)
    await store.insert_many([mail() for _ in range(30)])
    return deps


async def test_with_rate_ahead_a_rate_limited_type_is_claimed_ahead_each_for_its_start(
    autojump_clock: trio.testing.MockClock, deps: Deps, store: JobStore
) -> None:
    now = deps.clock.now()
    claimer = FlowClaimer(deps)
    claimed = await claimer.claim(now, 50)
    # One start now and one every 100 ms up to a second ahead, each queued for its start.
    assert [j.queued_at for j in claimed] == [
        now + timedelta(milliseconds=100 * i) for i in range(11)
    ]
    # The stretch is topped up once half of it has gone: at 0.6 s, up to 1.6 s.
    assert await claimer.claim(now, 50) == []
    assert claimer.wake_at == now + timedelta(milliseconds=600)
    # A new leader reads the bucket spent a second ahead and does the same.
    await trio.sleep(0.5)
    assert await FlowClaimer(deps).claim(deps.clock.now(), 50) == []
    await trio.sleep(0.1)
    topped = await FlowClaimer(deps).claim(deps.clock.now(), 50)
    assert [j.queued_at for j in topped] == [
        now + timedelta(milliseconds=1100 + 100 * i) for i in range(6)
    ]
    # The jobs the first leader claimed ahead (and sent) stay queued for their instants.
    queued = await store.list_jobs("a", Status.QUEUED, 100)
    assert {j.id for j in queued} == {j.id for j in claimed + topped}


async def test_a_job_that_takes_a_slot_is_not_claimed_ahead_of_its_start(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, rate_ahead=5.0)
    handlers = registry(rate_limit="10/s", burst=1, max_running=100)
    deps = make_deps(registry=handlers, settings=settings)
    await store.insert_many([mail() for _ in range(10)])
    claimed = await FlowClaimer(deps).claim(deps.clock.now(), 10)
    assert [j.queued_at for j in claimed] == [deps.clock.now()]


async def test_jobs_claimed_ahead_leave_the_room_ahead_to_those_that_start_now(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, claim_ahead=2, rate_ahead=2.0)
    handlers = registry(rate_limit="10/s", burst=1)
    deps = make_deps(registry=handlers, settings=settings)
    await store.insert_many([mail() for _ in range(40)] + [make_job() for _ in range(5)])
    claimed = await FlowClaimer(deps).claim(deps.clock.now(), 50)
    now = deps.clock.now()
    mails = [j for j in claimed if j.job_type == "mail"]
    assert len(mails) == 21  # now, then every 100 ms for 2 s: one of them takes room
    assert sum(j.queued_at == now for j in mails) == 1
    assert sum(j.job_type == "noop" for j in claimed) == 2
    assert await store.queued_by_type(now) == {"mail": 1, "noop": 2}


async def test_the_dispatch_loop_sends_a_job_claimed_ahead_at_once_naming_its_start(
    autojump_clock: trio.testing.MockClock, make_deps: DepsFactory, store: JobStore, tmp_path: Path
) -> None:
    bus = ObservedBus()
    settings = make_settings(tmp_path, rate_ahead=1.0)
    deps = make_deps(registry=registry(rate_limit="2/s", burst=1), settings=settings, bus=bus)
    jobs = [mail() for _ in range(3)]
    await store.insert_many(jobs)
    # The loop claims CLAIM_LEAD ahead of the clock: its first start is then.
    first = deps.clock.now() + timedelta(seconds=CLAIM_LEAD)
    with trio.move_on_after(0.05):
        await Scheduler(deps).dispatch_loop(await deps.elector.campaign())
    assert [m.not_before for m in bus.published] == [
        None,
        first + timedelta(milliseconds=500),
        first + timedelta(milliseconds=1000),
    ]


class LeaderDied(Exception):
    """The leader stopped between two writes of a claim."""


async def test_a_leader_that_dies_while_claiming_ahead_leaves_its_successor_the_stretch(
    autojump_clock: trio.testing.MockClock,
    deps: Deps,
    store: JobStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = deps.clock.now()
    claim_picks = store.claim_picks

    async def dies_once_claimed(at: datetime, picks: Any) -> list[Job]:
        await claim_picks(at, picks)
        raise LeaderDied

    monkeypatch.setattr(store, "claim_picks", dies_once_claimed)
    with pytest.raises(LeaderDied):
        await FlowClaimer(deps).claim(now, 50)
    stranded = await store.list_jobs("a", Status.QUEUED, 100)
    assert len(stranded) == 11
    # Its successor gives the same stretch to the jobs still pending: the rate does not
    # stop for the stretch the dead leader claimed and never sent; and the jobs it
    # stranded (queued, no wake-up sent) go back to pending.
    monkeypatch.setattr(store, "claim_picks", claim_picks)
    claimed = await FlowClaimer(deps).claim(now, 50)
    assert [j.queued_at for j in claimed] == [
        now + timedelta(milliseconds=100 * i) for i in range(11)
    ]
    queued = await store.list_jobs("a", Status.QUEUED, 100)
    assert {j.id for j in queued} == {j.id for j in claimed}
    pending = await store.list_jobs("a", Status.PENDING, 100)
    assert {j.id for j in stranded} <= {j.id for j in pending}
    assert len(pending) == 19


async def test_a_claim_ahead_whose_rate_another_leader_spent_meanwhile_is_withdrawn(
    autojump_clock: trio.testing.MockClock,
    deps: Deps,
    store: JobStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = deps.clock.now()
    claim_picks = store.claim_picks
    other: list[Job] = []

    async def raced(at: datetime, picks: Any) -> list[Job]:
        claimed = await claim_picks(at, picks)
        if not other:  # another leader claims and spends the bucket meanwhile
            monkeypatch.setattr(store, "claim_picks", claim_picks)
            other.extend(await FlowClaimer(deps).claim(now, 50))
        return claimed

    monkeypatch.setattr(store, "claim_picks", raced)
    assert await FlowClaimer(deps).claim(now, 50) == []
    assert len(other) == 11
    # Only the winner's jobs are queued; the loser's are pending again, to claim later.
    queued = await store.list_jobs("a", Status.QUEUED, 100)
    assert {j.id for j in queued} == {j.id for j in other}
    assert len(await store.list_jobs("a", Status.PENDING, 100)) == 19


async def test_a_leader_that_leads_again_re_pends_none_of_the_claims_ahead_sent_meanwhile(
    autojump_clock: trio.testing.MockClock, deps: Deps, store: JobStore
) -> None:
    first = FlowClaimer(deps)
    sent = await first.claim(deps.clock.now(), 50)
    await trio.sleep(0.6)
    sent += await FlowClaimer(deps).claim(deps.clock.now(), 50)  # another leader's term
    first.begin_term()
    assert await first.claim(deps.clock.now(), 50) == []
    queued = await store.list_jobs("a", Status.QUEUED, 100)
    assert {j.id for j in queued} == {j.id for j in sent}
    assert len(sent) == 17
