"""The JobStore contract for reads by id with a tenant: without one (the roles) a read finds
whatever has the id; with one, another tenant's job, run, attempt records, ledger records or
key are answered exactly as a missing id is. Run against every adapter."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobscheduler.domain import states
from jobscheduler.domain.cron import Occurrence, OccurrenceStatus
from jobscheduler.domain.keys import Role, new_key
from jobscheduler.domain.model import new_job_id
from jobscheduler.errors import JobNotFound
from jobscheduler.store import JobStore
from jobscheduler.store.jobs import OccurrenceQuery

from .store_support import NOW, make_job, running_job

B, A = "tenant-b", "tenant-a"


async def test_get_finds_a_job_of_its_tenant_and_another_tenants_as_a_missing_id(
    store: JobStore,
) -> None:
    job = await store.insert(make_job(tenant=B))
    assert await store.get(job.id) == job
    assert await store.get(job.id, tenant=B) == job
    with pytest.raises(JobNotFound) as foreign:
        await store.get(job.id, tenant=A)
    missing = new_job_id()
    with pytest.raises(JobNotFound) as unknown:
        await store.get(missing, tenant=A)
    assert str(foreign.value) == str(unknown.value).replace(missing, job.id)


async def test_find_run_with_a_tenant_finds_only_that_tenants_run(store: JobStore) -> None:
    template = await store.insert(make_job(tenant=B, cron="* * * * *"))
    run = await store.insert(states.spawn_instance(template, fire_at=NOW, now=NOW))
    assert await store.find_run(template.id, NOW) == run
    assert await store.find_run(template.id, NOW, tenant=B) == run
    assert await store.find_run(template.id, NOW, tenant=A) is None
    later = NOW + timedelta(minutes=1)
    assert await store.find_run(template.id, later, tenant=B) is None


async def test_attempts_with_a_tenant_are_those_of_a_job_of_that_tenant_only(
    store: JobStore,
) -> None:
    running = await running_job(store, tenant=B)
    assert await store.apply(states.complete(running, token="tok-1", now=NOW))
    [record] = await store.attempts(running.id)
    assert await store.attempts(running.id, tenant=B) == [record]
    assert await store.attempts(running.id, tenant=A) == []
    assert await store.attempts(new_job_id(), tenant=A) == []


async def test_occurrences_with_a_tenant_are_those_of_a_template_of_that_tenant_only(
    store: JobStore,
) -> None:
    template = await store.insert(make_job(tenant=B, cron="* * * * *"))
    record = Occurrence(
        template_id=template.id,
        tenant_id=B,
        fire_at=NOW,
        status=OccurrenceStatus.SPAWNED,
        recorded_at=NOW,
        run_id=new_job_id(),
    )
    await store.record_occurrences([record])
    assert await store.occurrences(OccurrenceQuery(template.id), limit=10) == [record]
    assert await store.occurrences(OccurrenceQuery(template.id, tenant=B), limit=10) == [record]
    assert await store.occurrences(OccurrenceQuery(template.id, tenant=A), limit=10) == []


async def test_get_key_with_a_tenant_finds_only_a_key_bound_to_it(store: JobStore) -> None:
    theirs, _ = new_key(tenant=B, role=Role.ADMIN, now=NOW)
    everyone, _ = new_key(tenant=None, role=Role.ADMIN, now=NOW)
    for key in (theirs, everyone):
        await store.insert_key(key)
    assert await store.get_key(theirs.id) == theirs
    assert await store.get_key(theirs.id, tenant=B) == theirs
    assert await store.get_key(theirs.id, tenant=A) is None
    assert await store.get_key(everyone.id) == everyone
    assert await store.get_key(everyone.id, tenant=A) is None
