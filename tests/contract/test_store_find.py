"""The JobStore contract, finding jobs: ``find_jobs`` filters (every condition, exact keys,
key prefixes, id lists) and keyset cursor pages in each sort order, across ties and
created ranges. One suite, run against every adapter."""

from __future__ import annotations

from datetime import timedelta

import attrs
import pytest

from jobscheduler.domain import states
from jobscheduler.domain.model import Job, Status
from jobscheduler.store import JobStore
from jobscheduler.store.query import Cursor, JobQuery, Sort

from .store_support import NOW, dead, make_job


async def every_page(store: JobStore, query: JobQuery, size: int) -> list[Job]:
    """The jobs ``query`` matches, read ``size`` at a time, each page after the last one's
    cursor."""
    seen: list[Job] = []
    after: Cursor | None = None
    while True:
        page = await store.find_jobs(query, size, after)
        seen += page
        if len(page) < size:
            return seen
        after = Cursor.after(page[-1], query.sort)


def in_order(jobs: list[Job], sort: Sort) -> list[str]:
    """The ids of ``jobs`` in ``sort``'s order, ties broken by id."""
    return [j.id for j in sorted(jobs, key=lambda j: (sort.key(j), j.id), reverse=sort.descending)]


# ----------------------------------------------------------------------- filters and pages


async def test_find_jobs_filters_by_every_condition(store: JobStore) -> None:
    dlq = await dead(store, tenant="t1", created_at=NOW + timedelta(seconds=1))
    template = await store.insert(make_job(cron="* * * * *", tenant="t1"))
    run = await store.insert(
        attrs.evolve(
            states.spawn_instance(template, fire_at=NOW, now=NOW), created_at=NOW, updated_at=NOW
        )
    )
    early = await store.insert(
        make_job(tenant="t1", job_type="email", created_at=NOW - timedelta(hours=1))
    )
    other = await store.insert(make_job(tenant="t2"))

    async def ids(**conditions: object) -> set[str]:
        query = JobQuery(**{"tenant_id": "t1", **conditions})  # type: ignore[arg-type]
        return {j.id for j in await store.find_jobs(query, 100)}

    assert await ids() == {template.id, run.id, early.id, dlq.id}
    assert await ids(tenant_id=None) == {template.id, run.id, early.id, dlq.id, other.id}
    assert await ids(job_type="email") == {early.id}
    assert await ids(statuses=(Status.DLQ,)) == {dlq.id}
    assert await ids(statuses=(Status.DLQ, Status.PENDING)) == {
        template.id,
        run.id,
        early.id,
        dlq.id,
    }
    assert await ids(statuses=(Status.FAILED,)) == set()
    assert await ids(template_id=template.id) == {run.id}
    assert await ids(cron=True) == {template.id}
    assert await ids(cron=False) == {run.id, early.id, dlq.id}
    assert await ids(created_after=NOW) == {template.id, run.id, dlq.id}
    assert await ids(created_before=NOW) == {early.id}
    assert await ids(created_after=NOW, created_before=NOW + timedelta(seconds=1)) == {
        template.id,
        run.id,
    }


async def test_cursor_pages_walk_every_match_once_newest_first_across_ties(
    store: JobStore,
) -> None:
    # Several jobs share each creation time: a page may end inside a group of ties.
    jobs = [
        await store.insert(make_job(created_at=NOW + timedelta(seconds=i // 3))) for i in range(10)
    ]
    await store.insert(make_job(tenant="someone-else"))
    query = JobQuery(tenant_id="tenant-a")
    assert [j.id for j in await every_page(store, query, 4)] == in_order(jobs, query.sort)


async def test_find_jobs_matches_an_exact_key_a_key_prefix_and_a_list_of_ids(
    store: JobStore,
) -> None:
    nightly = [await store.insert(make_job(key=f"nightly-run-{i}")) for i in range(3)]
    night = await store.insert(make_job(key="night"))
    other = await store.insert(make_job(key="nightly-run-0", tenant="t2"))

    async def ids(**conditions: object) -> set[str]:
        query = JobQuery(**{"tenant_id": "tenant-a", **conditions})  # type: ignore[arg-type]
        return {j.id for j in await store.find_jobs(query, 100)}

    assert await ids(idempotency_key="nightly-run-1") == {nightly[1].id}
    assert await ids(idempotency_key="nightly") == set()
    assert await ids(key_prefix="nightly-run-") == {j.id for j in nightly}
    assert await ids(key_prefix="night") == {night.id, *(j.id for j in nightly)}
    assert await ids(key_prefix="nightlyx") == set()
    assert await ids(ids=(nightly[0].id, night.id, other.id)) == {nightly[0].id, night.id}
    assert await ids(ids=(nightly[2].id,), key_prefix="night") == {nightly[2].id}


@pytest.mark.parametrize("sort", list(Sort))
async def test_cursor_pages_walk_every_match_once_in_each_sort_order(
    store: JobStore, sort: Sort
) -> None:
    # Created and due times run in opposite directions, each with ties across pages.
    jobs = [
        await store.insert(
            make_job(
                created_at=NOW + timedelta(seconds=i // 3),
                scheduled_at=NOW + timedelta(hours=1, seconds=-(i // 2)),
            )
        )
        for i in range(11)
    ]
    await store.insert(make_job(tenant="someone-else"))
    query = JobQuery(tenant_id="tenant-a", sort=sort)
    assert [j.id for j in await every_page(store, query, 4)] == in_order(jobs, query.sort)


@pytest.mark.parametrize("sort", [Sort.CREATED_DESC, Sort.SCHEDULED_ASC])
async def test_cursor_pages_over_several_statuses_interleave_them_in_order(
    store: JobStore, sort: Sort
) -> None:
    # Pending and dead jobs interleave in both orders (ties included); a third status
    # stays out. The dead ones first: each is claimed while it is the only due job.
    jobs = [await dead(store, created_at=NOW + timedelta(seconds=i)) for i in range(4)]
    for i in range(4):
        at = NOW + timedelta(seconds=i)
        jobs.append(await store.insert(make_job(created_at=at, scheduled_at=at)))
    await store.apply(states.cancel(await store.insert(make_job()), now=NOW))
    query = JobQuery(tenant_id="tenant-a", statuses=(Status.PENDING, Status.DLQ), sort=sort)
    assert [j.id for j in await every_page(store, query, 3)] == in_order(jobs, query.sort)


@pytest.mark.parametrize("sort", [Sort.CREATED_DESC, Sort.CREATED_ASC])
async def test_a_page_after_a_cursor_keeps_the_created_range(store: JobStore, sort: Sort) -> None:
    jobs = [await store.insert(make_job(created_at=NOW + timedelta(seconds=i))) for i in range(6)]
    query = JobQuery(
        tenant_id="tenant-a",
        created_after=NOW + timedelta(seconds=1),
        created_before=NOW + timedelta(seconds=5),
        sort=sort,
    )
    first = await store.find_jobs(query, 2)
    rest = await store.find_jobs(query, 10, Cursor.after(first[-1], sort))
    assert [j.id for j in first + rest] == in_order(jobs[1:5], sort)
