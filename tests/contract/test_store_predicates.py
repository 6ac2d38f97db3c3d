"""The JobStore contract for the named predicates: every adapter's reads select exactly the
jobs the one definition matches (``store/query.py``'s :data:`DUE_ONE_OFF`,
:data:`DUE_TEMPLATE`, :data:`PENDING`, :data:`BUFFERED`; ``domain/states``'
:data:`UNFINISHED`), over a mix of jobs in every status, templates among them. Run against
every adapter."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import attrs

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.store import JobStore
from jobscheduler.store.query import BUFFERED, DUE_ONE_OFF, DUE_TEMPLATE, PENDING, PassReads

from .store_support import NOW, make_job

EVERY = "* * * * *"


def mix() -> list[Job]:
    """Jobs of two tenants: one-offs and templates, due, early and late, in every status."""
    earlier, later = NOW - timedelta(minutes=5), NOW + timedelta(minutes=5)
    jobs = []
    for tenant in ("tenant-a", "tenant-b"):
        for status in Status:
            for at in (earlier, NOW, later):
                jobs.append(make_job(tenant=tenant, status=status, scheduled_at=at))
                template = make_job(tenant=tenant, status=status, scheduled_at=at, cron=EVERY)
                jobs.append(template)
                jobs.append(attrs.evolve(template, id=make_job().id, cron_buffered=at))
    # Unique keys: the buffered copies share their template's key otherwise.
    return [attrs.evolve(job, idempotency_key=f"key-{job.id}") for job in jobs]


async def stored_mix(store: JobStore) -> list[Job]:
    jobs = mix()
    outcomes = await store.insert_many(jobs)
    assert all(isinstance(outcome, Job) for outcome in outcomes), outcomes
    return jobs


async def test_due_templates_next_due_and_buffered_templates_select_what_their_predicates_match(
    store: JobStore,
) -> None:
    jobs = await stored_mix(store)
    due = {j.id for j in jobs if DUE_TEMPLATE.due(NOW).matches(j)}
    assert {j.id for j in await store.due_templates(NOW, 1000)} == due
    assert await store.next_due_at() == min(j.scheduled_at for j in jobs if PENDING.matches(j))
    buffered = {j.id for j in jobs if BUFFERED.matches(j)}
    assert {j.id for j in await store.buffered_templates(1000)} == buffered


async def test_pass_reads_answer_what_the_three_reads_of_a_pass_would(store: JobStore) -> None:
    jobs = await stored_mix(store)
    reads = await store.pass_reads(NOW)
    assert reads.templates_due is any(DUE_TEMPLATE.due(NOW).matches(j) for j in jobs)
    assert reads.templates_due
    assert reads.buffers_held is any(BUFFERED.matches(j) for j in jobs)
    assert reads.next_due_at == await store.next_due_at()
    before = NOW - timedelta(days=1)
    assert not (await store.pass_reads(before)).templates_due  # none due a day earlier


async def test_pass_reads_of_an_empty_store_find_nothing(store: JobStore) -> None:
    assert await store.pass_reads(NOW) == PassReads(
        templates_due=False, buffers_held=False, next_due_at=None
    )


async def test_the_oldest_due_job_of_stats_and_overview_is_the_oldest_due_one_off(
    store: JobStore,
) -> None:
    jobs = await stored_mix(store)
    later = NOW + timedelta(minutes=10)
    jobs.append(await store.insert(make_job(tenant="tenant-c", scheduled_at=later)))
    for tenant in ("tenant-a", "tenant-c", None):
        due = DUE_ONE_OFF.of_tenant(tenant).due(NOW)
        oldest = min((j.scheduled_at for j in jobs if due.matches(j)), default=None)
        assert (await store.stats(tenant, NOW)).oldest_due_at == oldest, tenant
        assert (await store.overview_stats(tenant, NOW)).oldest_due_at == oldest, tenant
    assert oldest is not None
    assert (await store.stats("tenant-c", later)).oldest_due_at == later


async def test_a_tenants_unfinished_count_is_its_jobs_in_the_unfinished_statuses(
    store: JobStore,
) -> None:
    jobs = await stored_mix(store)
    expected = sum(j.tenant_id == "tenant-b" and j.status in states.UNFINISHED for j in jobs)
    assert await store.count_unfinished("tenant-b") == expected


async def test_the_one_count_counts_by_status_and_by_type_of_a_tenant_or_of_all(
    store: JobStore,
) -> None:
    jobs = await stored_mix(store)
    jobs.append(await store.insert(make_job(tenant="tenant-b", job_type="email")))
    for tenant in ("tenant-b", None, "nobody"):
        mine = [j for j in jobs if tenant is None or j.tenant_id == tenant]
        by_status = {s: sum(j.status is s for j in mine) for s in Status}
        by_type = Counter((j.status, j.job_type) for j in mine)
        counts = await store.count_jobs(tenant)
        assert (counts.by_status, counts.by_type) == (by_status, None), tenant
        typed = await store.count_jobs(tenant, by_type=True)
        assert (typed.by_status, typed.by_type) == (by_status, dict(by_type)), tenant
        some = await store.count_jobs(tenant, states.IN_FLIGHT, by_type=True)
        assert some.by_status == {s: by_status[s] for s in states.IN_FLIGHT}, tenant
        assert some.by_type == {k: n for k, n in by_type.items() if k[0] in states.IN_FLIGHT}
        assert (await store.stats(tenant, NOW)).counts == dict(by_type), tenant
        assert (await store.overview_stats(tenant, NOW)).counts == by_status, tenant
    assert await store.count_by_status() == {s: sum(j.status is s for j in jobs) for s in Status}


async def test_a_claim_takes_exactly_the_due_one_off_jobs(store: JobStore) -> None:
    jobs = await stored_mix(store)
    due = {j.id for j in jobs if DUE_ONE_OFF.due(NOW).matches(j)}
    assert due
    claimed = await store.claim_due(NOW, 1000)
    assert {j.id for j in claimed} == due
    assert all(j.status is Status.QUEUED for j in claimed)
    assert await store.claim_due(NOW, 1000) == []
