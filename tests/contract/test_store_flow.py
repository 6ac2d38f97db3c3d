"""The flow-control part of the JobStore contract (:class:`~jobscheduler.store.base.FlowControl`),
run against every adapter: fair candidates by group, slot claims that two claimers can never
double, slots freed by the transitions that end a run, rate buckets written conditionally,
and the limits, weights and report an admin or the leader stores."""

from __future__ import annotations

from datetime import timedelta

import trio

from jobscheduler.domain import states
from jobscheduler.domain.flow import (
    FlowReport,
    LimitOverride,
    Limits,
    TenantWeight,
)
from jobscheduler.domain.model import Job, Status
from jobscheduler.store import JobStore
from jobscheduler.store.query import Candidate, Exclusions, Pick
from tests.support.flow_holds import key_hold

from .store_support import NOW, make_job

SLOT = "k:tenant-a/noop/customer-42#0"


async def test_fair_candidates_take_the_oldest_of_each_group_at_the_top_level(
    store: JobStore,
) -> None:
    backlog = [
        make_job(tenant="a", scheduled_at=NOW - timedelta(seconds=100 - i)) for i in range(10)
    ]
    late = [make_job(tenant="b", scheduled_at=NOW - timedelta(seconds=1)) for _ in range(2)]
    keyed = make_job(tenant="a", fairness_key="report", scheduled_at=NOW)
    lower = make_job(tenant="c", priority=-1, scheduled_at=NOW - timedelta(hours=1))
    future = make_job(tenant="d", scheduled_at=NOW + timedelta(seconds=5))
    await store.insert_many([*backlog, *late, keyed, lower, future])
    found = await store.fair_candidates(NOW, 3)
    assert sorted(j.id for j in found) == sorted(
        [*(j.id for j in backlog[:3]), *(j.id for j in late), keyed.id]
    )


async def test_a_fair_candidate_carries_what_the_claim_reads_of_its_job(store: JobStore) -> None:
    keyed = make_job(
        tenant="a",
        priority=2,
        fairness_key="report",
        concurrency_key="customer-7",
        scheduled_at=NOW - timedelta(seconds=3),
        payload={"big": "x" * 1000},
    )
    plain = make_job(tenant="b", scheduled_at=NOW - timedelta(seconds=1))
    await store.insert_many([keyed, plain])
    found = await store.fair_candidates(NOW, 5)
    stored = [await store.get(job.id) for job in (keyed, plain)]
    assert sorted(found) == sorted(Candidate.of(job) for job in stored)


async def test_fair_candidates_read_lower_levels_while_the_top_holds_too_few(
    store: JobStore,
) -> None:
    top = make_job(tenant="a", priority=5)
    lower = [make_job(tenant="b", priority=1) for _ in range(3)]
    await store.insert_many([top, *lower])
    found = await store.fair_candidates(NOW, 3)
    assert {j.id for j in found} == {top.id, *(j.id for j in lower)}


async def test_fair_candidates_leave_out_the_excluded_types_and_keys(store: JobStore) -> None:
    held_type = make_job(tenant="a", job_type="mail")
    other_tenant = make_job(tenant="b", job_type="mail")
    held_key = make_job(tenant="a", concurrency_key="customer-1")
    free_key = make_job(tenant="a", concurrency_key="customer-2")
    no_key = make_job(tenant="a")
    await store.insert_many([held_type, other_tenant, held_key, free_key, no_key])
    exclude = Exclusions(
        types=frozenset({("a", "mail")}), keys=frozenset({("a", "noop", "customer-1")})
    )
    found = await store.fair_candidates(NOW, 10, exclude)
    assert {j.id for j in found} == {other_tenant.id, free_key.id, no_key.id}


async def test_fair_candidates_with_a_type_left_out_take_each_groups_oldest_of_the_others(
    store: JobStore,
) -> None:
    def due(job_type: str, ago: int) -> Job:
        return make_job(tenant="a", job_type=job_type, scheduled_at=NOW - timedelta(seconds=ago))

    held = [due("mail", 100 - i) for i in range(5)]  # the oldest of the group
    report = [due("report", 50), due("report", 20), due("report", 10)]
    resize = [due("resize", 40), due("resize", 30), due("resize", 5)]
    await store.insert_many([*held, *report, *resize])
    found = await store.fair_candidates(NOW, 3, Exclusions(types=frozenset({("a", "mail")})))
    assert {j.id for j in found} == {report[0].id, resize[0].id, resize[1].id}


async def test_a_slot_is_held_by_one_job_and_freed_by_the_transition_that_ends_its_run(
    store: JobStore,
) -> None:
    first, second = make_job(concurrency_key="customer-42"), make_job(concurrency_key="customer-42")
    await store.insert_many([first, second])
    [claimed] = await store.claim_picks(NOW, [Pick(job_id=first.id, key_slot=SLOT)])
    assert (claimed.status, claimed.key_slot) == (Status.QUEUED, SLOT)
    assert await store.claim_picks(NOW, [Pick(job_id=second.id, key_slot=SLOT)]) == []
    assert (await store.get(second.id)).status is Status.PENDING
    assert await store.held_slots() == [SLOT]
    picked = await store.apply(states.pick(first.id, worker="w", token="t", now=NOW))
    assert picked is not None
    assert picked.key_slot == SLOT
    running = await store.apply(states.start(first.id, token="t", now=NOW))
    assert running is not None
    done = await store.apply(states.complete(running, token="t", now=NOW))
    assert done is not None
    assert done.key_slot is None
    assert await store.held_slots() == []
    [now_second] = await store.claim_picks(NOW, [Pick(job_id=second.id, key_slot=SLOT)])
    assert now_second.key_slot == SLOT


async def test_recovering_a_lost_run_frees_its_slots(store: JobStore) -> None:
    job = await store.insert(make_job(concurrency_key="customer-42"))
    type_slot = "t:tenant-a/noop#0"
    await store.claim_picks(NOW, [Pick(job_id=job.id, key_slot=SLOT, type_slot=type_slot)])
    await store.apply(states.pick(job.id, worker="w", token="t", now=NOW))
    running = await store.apply(states.start(job.id, token="t", now=NOW))
    assert running is not None
    assert sorted(await store.held_slots()) == sorted([SLOT, type_slot])
    recovered = await store.apply(states.recover(running, now=NOW + timedelta(minutes=5)))
    assert recovered is not None
    assert recovered.status is Status.PENDING
    assert (recovered.key_slot, recovered.type_slot) == (None, None)
    assert await store.held_slots() == []


async def test_concurrent_claims_of_one_slot_give_it_to_exactly_one_job(store: JobStore) -> None:
    jobs = [make_job(concurrency_key="customer-42") for _ in range(6)]
    await store.insert_many(jobs)
    won: list[str] = []

    async def claim(job_id: str) -> None:
        won.extend(j.id for j in await store.claim_picks(NOW, [Pick(job_id=job_id, key_slot=SLOT)]))

    async with trio.open_nursery() as nursery:
        for job in jobs:
            nursery.start_soon(claim, job.id)
    assert len(won) == 1
    assert await store.held_slots() == [SLOT]


async def test_claim_picks_claims_only_due_pending_jobs_and_answers_in_pick_order(
    store: JobStore,
) -> None:
    later = make_job(scheduled_at=NOW + timedelta(seconds=10))
    first, second = make_job(), make_job()
    await store.insert_many([later, first, second])
    picks = [Pick(job_id=i) for i in (second.id, later.id, first.id)]
    claimed = await store.claim_picks(NOW, picks)
    assert [j.id for j in claimed] == [second.id, first.id]
    assert await store.claim_picks(NOW, picks) == []


async def test_a_bucket_is_written_only_from_the_instant_read(store: JobStore) -> None:
    scope = "t:tenant-a/mail"
    assert await store.buckets([scope]) == {}
    assert await store.put_bucket(scope, None, NOW)
    assert not await store.put_bucket(scope, None, NOW + timedelta(seconds=1))
    assert await store.put_bucket(scope, NOW, NOW + timedelta(milliseconds=20))
    assert not await store.put_bucket(scope, NOW, NOW + timedelta(milliseconds=40))
    assert await store.buckets([scope, "other"]) == {scope: NOW + timedelta(milliseconds=20)}


async def test_limit_overrides_and_weights_are_replaced_and_deleted(store: JobStore) -> None:
    limits = Limits.of(concurrency=2, rate_limit="10/m")
    await store.put_limit_override(LimitOverride(tenant_id="a", job_type="mail", limits=limits))
    await store.put_limit_override(
        LimitOverride(tenant_id="b", job_type="mail", limits=Limits.of(max_running=1))
    )
    [mine] = await store.limit_overrides("a")
    assert mine.limits == limits
    await store.put_limit_override(LimitOverride(tenant_id="a", job_type="mail", limits=Limits()))
    assert [o.tenant_id for o in await store.limit_overrides()] == ["b"]
    await store.put_tenant_weight(TenantWeight(tenant_id="a", weight=3))
    await store.put_tenant_weight(TenantWeight(tenant_id="b", weight=2))
    await store.put_tenant_weight(TenantWeight(tenant_id="b", weight=1))
    assert await store.tenant_weights() == [TenantWeight(tenant_id="a", weight=3)]


async def test_the_flow_report_round_trips(store: JobStore) -> None:
    assert await store.flow_report() is None
    hold = key_hold("a", "customer-42", waiting=7, scope="k:a/mail/customer-42")
    await store.put_flow_report(FlowReport(at=NOW, holds=(hold,)))
    assert await store.flow_report() == FlowReport(at=NOW, holds=(hold,))


async def test_queued_by_type_counts_only_the_queued_jobs(store: JobStore) -> None:
    await store.insert_many([make_job(job_type="mail") for _ in range(3)] + [make_job()])
    await store.insert(make_job(job_type="mail", scheduled_at=NOW + timedelta(hours=1)))
    assert await store.queued_by_type(NOW) == {}
    await store.claim_due(NOW, 10)
    assert await store.queued_by_type(NOW) == {"mail": 3, "noop": 1}


async def test_a_job_claimed_ahead_is_queued_for_its_start_and_picked_only_for_it(
    store: JobStore,
) -> None:
    soon, now = make_job(job_type="mail"), make_job(job_type="mail")
    await store.insert_many([soon, now])
    start = NOW + timedelta(seconds=7, milliseconds=250)
    picks = [Pick(job_id=soon.id, start_at=start), Pick(job_id=now.id)]
    claimed = await store.claim_picks(NOW, picks)
    assert [(j.id, j.queued_at) for j in claimed] == [(soon.id, start), (now.id, NOW)]
    assert (await store.get(soon.id)).queued_at == start
    # The room ahead counts what can start by then; the reaper counts from the start.
    assert await store.queued_by_type(NOW) == {"mail": 1}
    assert await store.queued_by_type(start) == {"mail": 2}
    assert [j.id for j in await store.find_stale([Status.QUEUED], "queued_at", NOW, 10)] == []
    # A wake-up naming another instant (an earlier claim's) does not pick it; its own does.
    later = start + timedelta(seconds=1)
    wrong = states.pick(soon.id, worker="w", token="t1", now=later, queued_for=NOW)
    right = states.pick(soon.id, worker="w", token="t2", now=later, queued_for=start)
    assert await store.apply(wrong) is None
    picked = await store.apply(right)
    assert picked is not None
    assert picked.claim_token == "t2"
