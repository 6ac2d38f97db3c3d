"""The JobStore contract for tenancy: API keys, the audit trail and the unfinished count,
run against every adapter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest

from jobscheduler.domain import states
from jobscheduler.domain.audit import AuditQuery, new_record
from jobscheduler.domain.keys import Role, new_key, parse_token
from jobscheduler.errors import DuplicateJob, StoreError
from jobscheduler.store import JobStore

from .store_support import make_job

NOW = datetime(2026, 9, 29, 18, 0, 0, tzinfo=UTC)


async def test_a_key_is_stored_with_its_hash_and_read_back_by_id(store: JobStore) -> None:
    record, token = new_key(tenant="acme", role=Role.WRITER, name="ci", now=NOW)
    await store.insert_key(record)
    found = await store.get_key(record.id)
    assert found == record
    assert found is not None
    parsed = parse_token(token)
    assert parsed is not None
    _, secret = parsed  # the whole secret (it may hold "_" itself), never stored in clear
    assert secret not in found.secret_hash
    assert await store.get_key("0" * 16) is None


async def test_list_keys_filters_by_tenant_and_keeps_all_tenant_keys_apart(
    store: JobStore,
) -> None:
    a, _ = new_key(tenant="acme", role=Role.READER, now=NOW)
    b, _ = new_key(tenant="other", role=Role.WRITER, now=NOW + timedelta(seconds=1))
    ops, _ = new_key(tenant=None, role=Role.ADMIN, now=NOW + timedelta(seconds=2))
    for key in (a, b, ops):
        await store.insert_key(key)
    assert [k.id for k in await store.list_keys(None)] == [a.id, b.id, ops.id]
    assert [k.id for k in await store.list_keys("acme")] == [a.id]


async def test_a_second_key_with_a_taken_id_is_refused_as_a_store_error(store: JobStore) -> None:
    record, _ = new_key(tenant="acme", role=Role.WRITER, now=NOW)
    await store.insert_key(record)
    clash, _ = new_key(tenant="other", role=Role.ADMIN, now=NOW + timedelta(seconds=1))
    with pytest.raises(StoreError):
        await store.insert_key(attrs.evolve(clash, id=record.id))
    assert await store.get_key(record.id) == record


async def test_revoke_marks_the_key_once_and_unknown_ids_are_none(store: JobStore) -> None:
    record, _ = new_key(tenant="acme", role=Role.WRITER, now=NOW)
    await store.insert_key(record)
    first = await store.revoke_key(record.id, NOW + timedelta(seconds=5))
    again = await store.revoke_key(record.id, NOW + timedelta(seconds=9))
    assert first is not None
    assert first.revoked_at == NOW + timedelta(seconds=5)
    assert again is not None
    assert again.revoked_at == first.revoked_at
    stored = await store.get_key(record.id)
    assert stored is not None
    assert stored.revoked
    assert await store.revoke_key("f" * 16, NOW) is None


async def test_audit_records_are_listed_newest_first_with_filters_and_cursor(
    store: JobStore,
) -> None:
    records = [
        new_record(
            now=NOW + timedelta(seconds=i),
            key_id="k1" if i % 2 else "k2",
            tenant="acme" if i < 4 else "other",
            action="POST /jobs",
            status=201,
            job_id=None,
        )
        for i in range(6)
    ]
    for record in records:
        await store.append_audit(record)
    everything = await store.list_audit(AuditQuery())
    assert [r.id for r in everything] == [r.id for r in reversed(records)]
    assert everything[0] == records[-1]
    acme = await store.list_audit(AuditQuery(tenant="acme", limit=2))
    assert [r.id for r in acme] == [records[3].id, records[2].id]
    page2 = await store.list_audit(AuditQuery(tenant="acme", limit=2, before=acme[-1].id))
    assert [r.id for r in page2] == [records[1].id, records[0].id]
    by_key = await store.list_audit(AuditQuery(key_id="k1"))
    assert {r.id for r in by_key} == {records[i].id for i in (1, 3, 5)}
    window = await store.list_audit(
        AuditQuery(since=NOW + timedelta(seconds=2), until=NOW + timedelta(seconds=4))
    )
    assert [r.id for r in window] == [records[3].id, records[2].id]


async def test_an_insert_writes_its_audit_record_only_when_the_job_is_written(
    store: JobStore,
) -> None:
    job = make_job(tenant="acme")
    record = new_record(
        now=NOW, key_id="k1", tenant="acme", action="POST /jobs", status=201, job_id=job.id
    )
    assert await store.insert(job, audit=record) == job
    refused = make_job(tenant="acme", key=job.idempotency_key)
    refused_record = new_record(
        now=NOW, key_id="k1", tenant="acme", action="POST /jobs", status=201, job_id=refused.id
    )
    with pytest.raises(DuplicateJob):
        await store.insert(refused, audit=refused_record)
    assert await store.list_audit(AuditQuery()) == [record]


async def test_prune_audit_deletes_only_older_records(store: JobStore) -> None:
    old = new_record(now=NOW, key_id=None, tenant="acme", action="POST /jobs", status=201)
    new = new_record(
        now=NOW + timedelta(days=2), key_id=None, tenant="acme", action="POST /jobs", status=201
    )
    await store.append_audit(old)
    await store.append_audit(new)
    assert await store.prune_audit(NOW + timedelta(days=1), 100) == 1
    assert [r.id for r in await store.list_audit(AuditQuery())] == [new.id]


async def test_count_unfinished_counts_a_tenants_live_jobs_only(store: JobStore) -> None:
    live = [make_job(tenant="acme") for _ in range(3)]
    for job in live:
        await store.insert(job)
    await store.insert(make_job(tenant="other"))
    await store.insert(make_job(tenant="acme", cron="*/5 * * * *"))
    claimed = await store.claim_due(NOW, 5)
    assert {j.id for j in live} <= {j.id for j in claimed}
    assert await store.count_unfinished("acme") == 4  # 3 queued + the pending template
    # A completed job no longer counts.
    target, token = claimed[0], "t-1"
    assert await store.apply(states.pick(target.id, worker="w", token=token, now=NOW))
    running = await store.apply(states.start(target.id, token=token, now=NOW))
    assert running is not None
    assert await store.apply(states.complete(running, token=token, now=NOW))
    assert await store.count_unfinished("acme") == 3
    assert await store.count_unfinished("nobody") == 0


async def test_idempotency_keys_are_unique_per_tenant_not_globally(store: JobStore) -> None:
    from jobscheduler.errors import DuplicateJob

    await store.insert(make_job(key="shared", tenant="acme"))
    other = await store.insert(make_job(key="shared", tenant="other"))
    assert (await store.get(other.id)).tenant_id == "other"
    with pytest.raises(DuplicateJob):
        await store.insert(make_job(key="shared", tenant="acme"))


async def test_tenants_are_the_distinct_tenants_of_the_jobs_in_order_up_to_the_limit(
    store: JobStore,
) -> None:
    assert await store.tenants(10) == []
    for tenant in ("globex", "acme", "initech", "acme"):
        await store.insert(make_job(tenant=tenant))
    await store.insert(make_job(tenant="umbrella", cron="*/5 * * * *"))
    # A key of a tenant without jobs does not make it a tenant of the jobs.
    key, _ = new_key(tenant="hooli", role=Role.READER, now=NOW)
    await store.insert_key(key)
    assert await store.tenants(10) == ["acme", "globex", "initech", "umbrella"]
    assert await store.tenants(2) == ["acme", "globex"]
    assert await store.tenants(0) == []
